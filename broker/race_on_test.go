//go:build race

package broker

// raceAllocFactor is how many times the bytes a decode allocates are
// counted under the race detector, whose instrumentation makes kmsg's
// append(s, make([]T, n)...) allocate the elements twice.
const raceAllocFactor = 2
