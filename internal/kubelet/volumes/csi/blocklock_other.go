//go:build !linux

package csi

import "errors"

var errBlockUnsupported = errors.New("kubernetes.io/csi: block volumes need Linux")

func lockBlockDevice(device, globalMapPath, podUID string) error { return errBlockUnsupported }

func unlockBlockDevice(globalMapPath, podUID string) error { return nil }
