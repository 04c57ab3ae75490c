//go:build !unix

package diskcost

import "time"

// ProcessCPU is not measured on this platform: it returns 0.
func ProcessCPU() time.Duration { return 0 }
