package main

import (
	"os"
	"syscall"
)

// divertStderr points file descriptor 2 at a log file, so that what the
// embedded API server and etcd write straight to stderr (etcd's zap logger
// bypasses klog) does not drown the demo's output, and returns a file on
// the original stderr for the watcher's own lines.
func divertStderr(logFile *os.File) (*os.File, error) {
	saved, err := syscall.Dup(2)
	if err != nil {
		return nil, err
	}
	if err := syscall.Dup3(int(logFile.Fd()), 2, 0); err != nil {
		_ = syscall.Close(saved)
		return nil, err
	}
	return os.NewFile(uintptr(saved), "/dev/stderr"), nil
}
