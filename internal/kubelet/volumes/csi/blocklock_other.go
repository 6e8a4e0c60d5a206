//go:build !linux

package csi

import "errors"

var errBlockUnsupported = errors.New("kubernetes.io/csi: block volumes need Linux")

func lockBlockDevice(device, mapFile string) error { return errBlockUnsupported }

func unlockBlockDevice(mapFile string) error { return nil }
