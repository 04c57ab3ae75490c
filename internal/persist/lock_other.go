//go:build !unix

package persist

import (
	"errors"
	"os"
)

// errNoLock: without flock the directory cannot be shared safely, so it
// is not used.
var errNoLock = errors.New("persist: cache directories need flock (unix)")

func lockFile(*os.File) error { return errNoLock }
func unlockFile(*os.File)     {}
