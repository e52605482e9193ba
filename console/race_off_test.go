//go:build !race

package console

import "time"

// interactiveDeadline is how soon a page must show its content: issue
// 32's goal, every page interactive within a second, also at 10 000
// partitions.
const interactiveDeadline = time.Second
