//go:build !linux

package main

import (
	"errors"
	"os"
)

func divertStderr(*os.File) (*os.File, error) {
	return nil, errors.New("not supported on this platform")
}
