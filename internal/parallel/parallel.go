// Package parallel runs indexed work on a bounded number of goroutines.
package parallel

import "sync"

// FirstError calls fn(i) for every i in [0, n), on at most workers
// goroutines at once, in the order of i as workers free up, and returns
// the error of the lowest i that failed, or nil. Every call has returned
// when it returns.
func FirstError(n, workers int, fn func(i int) error) error {
	if n == 1 || workers <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
