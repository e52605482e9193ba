package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the lock file a broker holds in each of its log dirs.
const lockFileName = ".lock"

// LockLogDirs creates each log dir and takes an exclusive flock on its
// lock file, so that two brokers never share a directory. The kernel drops
// the locks when the process dies, so a crashed broker never blocks its
// successor.
func LockLogDirs(dirs []string) ([]*os.File, error) {
	var locks []*os.File
	release := func() {
		for _, f := range locks {
			f.Close()
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			release()
			return nil, fmt.Errorf("create log.dirs directory %s: %w", d, err)
		}
		path := filepath.Join(d, lockFileName)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			release()
			return nil, fmt.Errorf("open lock file %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder, _ := os.ReadFile(path)
			f.Close()
			release()
			return nil, fmt.Errorf("log.dirs %s is in use by another broker process (pid %s, lock %s): %w",
				d, strings.TrimSpace(string(holder)), path, err)
		}
		// The lock file names its holder, so that a second broker on the
		// same directory can say which process holds it.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		locks = append(locks, f)
	}
	return locks, nil
}
