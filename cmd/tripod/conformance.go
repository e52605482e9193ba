package main

import "github.com/spf13/cobra"

func newConformanceCmd() *cobra.Command { return &cobra.Command{Use: "conformance"} }
