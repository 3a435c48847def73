//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: the
// deferred stop is all there is.
func dieWithParent(*exec.Cmd) {}
