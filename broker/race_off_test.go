//go:build !race

package broker

// raceAllocFactor is how many times the bytes a decode allocates are
// counted: once without the race detector (see race_on_test.go).
const raceAllocFactor = 1
