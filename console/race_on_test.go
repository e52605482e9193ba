//go:build race

package console

import "time"

// interactiveDeadline is how soon a page must show its content. Under the
// race detector, whose instrumentation slows the console and the test
// several times, the tests check what a page shows but not how fast:
// the goal of a second is the product's, measured without it.
const interactiveDeadline = 10 * time.Second
