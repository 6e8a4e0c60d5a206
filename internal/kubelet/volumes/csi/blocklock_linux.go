package csi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockBlockDevice maps a pod's published block device as upstream's
// MapBlockVolume does: the device bind-mounted on globalMapPath/<podUID>,
// and a loop device attached to that file (upstream's "descriptor lock":
// the device stays open, so it cannot be removed and another device take its
// name while a container uses it). Done again, it changes nothing. The
// errors are upstream's.
func lockBlockDevice(device, globalMapPath, podUID string) error {
	mapFile := filepath.Join(globalMapPath, podUID)
	if err := bindMountDevice(device, mapFile); err != nil {
		return fmt.Errorf("blkUtil.MapDevice failed. devicePath: %s, globalMapPath:%s, podUID: %s, bindMount: %v: %w",
			device, globalMapPath, podUID, true, err)
	}
	if err := attachFileDevice(mapFile); err != nil {
		return fmt.Errorf("blkUtil.AttachFileDevice failed. globalMapPath:%s, podUID: %s: %w", globalMapPath, podUID, err)
	}
	return nil
}

// bindMountDevice bind-mounts device on mapFile, made as an empty file if
// missing; a mapFile that is a device already is left (upstream's
// mapBindMountDevice).
func bindMountDevice(device, mapFile string) error {
	if err := os.MkdirAll(filepath.Dir(mapFile), 0o750); err != nil {
		return fmt.Errorf("failed to mkdir %s: %w", filepath.Dir(mapFile), err)
	}
	fi, err := os.Stat(mapFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, cerr := os.OpenFile(mapFile, os.O_CREATE|os.O_RDWR, 0o750)
		if cerr != nil {
			return fmt.Errorf("failed to open file %s: %w", mapFile, cerr)
		}
		if cerr := f.Close(); cerr != nil {
			return fmt.Errorf("failed to close file %s: %w", mapFile, cerr)
		}
	case err != nil:
		return fmt.Errorf("failed to stat file %s: %w", mapFile, err)
	case fi.Mode()&fs.ModeDevice != 0:
		return nil // mapped already
	}
	if err := unix.Mount(device, mapFile, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("failed to bind mount devicePath: %s to linkPath %s: %w", device, mapFile, err)
	}
	return nil
}

// attachFileDevice attaches a loop device to path unless one is (upstream's
// AttachFileDevice).
func attachFileDevice(path string) error {
	loop, err := loopDeviceOf(path)
	if err != nil {
		return fmt.Errorf("GetLoopDevice failed for path %s: %w", path, err)
	}
	if loop != "" {
		return nil
	}
	if out, err := exec.Command("losetup", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("makeLoopDevice failed for path %s: losetup -f %s failed: %w (%s)", path, path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unlockBlockDevice undoes lockBlockDevice, as upstream's UnmapBlockVolume
// (its errors too): the loop device detached, the bind mount unmounted,
// mapFile removed. Parts already undone are skipped.
func unlockBlockDevice(globalMapPath, podUID string) error {
	mapFile := filepath.Join(globalMapPath, podUID)
	fi, err := os.Stat(mapFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to check if path %s exists: %w", mapFile, err)
	}
	loop, err := loopDeviceOf(mapFile)
	if err != nil {
		return fmt.Errorf("blkUtil.DetachFileDevice failed. globalUnmapPath:%s, podUID: %s: GetLoopDevice failed for path %s: %w", globalMapPath, podUID, mapFile, err)
	}
	if loop != "" {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			if _, serr := os.Stat(loop); !errors.Is(serr, fs.ErrNotExist) {
				return fmt.Errorf("blkUtil.DetachFileDevice failed. globalUnmapPath:%s, podUID: %s: removeLoopDevice failed for path %s: losetup -d %s failed: %w (%s)",
					globalMapPath, podUID, mapFile, loop, err, strings.TrimSpace(string(out)))
			}
		}
	}
	if fi.Mode()&fs.ModeDevice != 0 {
		if err := unix.Unmount(mapFile, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("blkUtil.DetachFileDevice failed. globalUnmapPath:%s, podUID: %s, bindMount: %v: failed to unmount linkPath %s: %w",
				globalMapPath, podUID, true, mapFile, err)
		}
	}
	if err := os.Remove(mapFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove file %s: %w", mapFile, err)
	}
	return nil
}

// loopDeviceOf returns the loop device whose backing file is path (or its
// real path), "" when none, as upstream reads it from sysfs.
func loopDeviceOf(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("failed to evaluate path %s: %w", path, err)
	}
	devices, err := filepath.Glob(filepath.Join(sysBlockDir, "loop*"))
	if err != nil {
		return "", fmt.Errorf("failed to list loop devices in sysfs: %w", err)
	}
	for _, dev := range devices {
		b, err := os.ReadFile(filepath.Join(dev, "loop", "backing_file"))
		if err != nil {
			continue // not attached
		}
		backing := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(b)), "(deleted)"))
		if backing == path || backing == real {
			return "/dev/" + filepath.Base(dev), nil
		}
	}
	return "", nil
}

// sysBlockDir lists the block devices.
const sysBlockDir = "/sys/block"
