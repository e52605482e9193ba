package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// readStartOffset reads the log start offset checkpoint of dir; -1 if
// there is none.
func readStartOffset(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, startOffsetFile))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log start offset checkpoint: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("log start offset checkpoint %s holds %q, want an offset", filepath.Join(dir, startOffsetFile), b)
	}
	return n, nil
}

// writeStartOffset replaces the log start offset checkpoint of dir.
func writeStartOffset(dir string, offset int64) error {
	if err := writeFileAtomic(dir, startOffsetFile, strconv.FormatInt(offset, 10)+"\n"); err != nil {
		return fmt.Errorf("write log start offset checkpoint %d: %w", offset, err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with content atomically and durably:
// write name.tmp, fsync it, rename it over name, fsync dir.
func writeFileAtomic(dir, name, content string) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that file creations, renames and
// removals in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// writeCleanShutdown marks dir as closed cleanly. The caller has fsynced
// the log, so the marker needs no fsync of its own: if a power failure
// loses it, the next Open merely verifies the whole last segment.
func writeCleanShutdown(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, cleanShutdownFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("mark clean shutdown of %s: %w", dir, err)
	}
	return nil
}
