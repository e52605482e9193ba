package replica

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new content, never a mix: it writes a temporary file, fsyncs
// it, renames it over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte) error {
	return replaceFile(path, data, true)
}

// replaceFile writes data to a temporary file beside path and renames it
// over path, so that a process that crashes leaves the old or the new
// content. durable also fsyncs the file before the rename and the
// directory after it, so that a machine that loses power does too;
// without them it may leave the file empty or garbled. Each fsync flushes
// the device's write cache, which holds up every write on the disk
// meanwhile (100-500 ms on the development machine under load), so files
// rewritten every few seconds whose loss costs only a slower start skip
// them.
func replaceFile(path string, data []byte, durable bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("sync %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp.Name(), path, err)
	}
	if !durable {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
