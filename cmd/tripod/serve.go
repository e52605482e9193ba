package main

import "github.com/spf13/cobra"

func newServeCmd() *cobra.Command { return &cobra.Command{Use: "serve"} }
