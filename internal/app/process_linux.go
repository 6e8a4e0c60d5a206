package app

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/features"
)

// hostFiles are the host files the process checks read and write (tests
// point them at fakes).
type hostFiles struct {
	// CgroupRoot is statfs'd: cgroup2's magic means a unified hierarchy.
	CgroupRoot string
	// Swaps is /proc/swaps; OOMScoreAdj is /proc/self/oom_score_adj.
	Swaps       string
	OOMScoreAdj string
	// ProcSys holds the kernel tunables (/proc/sys); UIDMap is
	// /proc/self/uid_map (a user namespace maps less than all uids).
	ProcSys, UIDMap string
}

var realHostFiles = hostFiles{CgroupRoot: cgroups.DefaultRoot, Swaps: "/proc/swaps", OOMScoreAdj: "/proc/self/oom_score_adj", ProcSys: procSysDir(), UIDMap: "/proc/self/uid_map"}

// prepareProcess applies, at start and in upstream's order and wording, the
// settings that concern the kubelet process and its host: runOnce (refused:
// this kubelet has no run-once mode), failCgroupV1, failSwapOn, maxOpenFiles
// (RLIMIT_NOFILE), oomScoreAdj, and the kernel tunables (protectKernelDefaults:
// checked, else set). A refused limit or score is logged and start goes on, as
// upstream (raising the hard limit or a negative score needs CAP_SYS_RESOURCE);
// a kernel tunable that is wrong (protected) or cannot be set stops it, as
// upstream's container manager does.
func prepareProcess(cfg *Config, h hostFiles, logger *zap.Logger) error {
	k := &cfg.Kubelet
	if k.RunOnce {
		return errors.New("runOnce (--runonce): this kubelet has no run-once mode")
	}
	if *k.FailCgroupV1 || k.SingleProcessOOMKill != nil && !*k.SingleProcessOOMKill {
		unified, err := cgroups.IsUnified(h.CgroupRoot)
		if err != nil {
			return fmt.Errorf("the cgroup version: %w", err)
		}
		if !unified && *k.FailCgroupV1 {
			return errors.New("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release")
		}
		if !unified {
			return errors.New("invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1")
		}
	}
	if *k.FailSwapOn {
		on, err := swapOn(h.Swaps)
		if err != nil {
			return err
		}
		if on {
			return errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")
		}
	}
	if k.MaxOpenFiles > 0 {
		n := uint64(k.MaxOpenFiles)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			logger.Error("Failed to set rlimit on max file handles", zap.Uint64("maxOpenFiles", n), zap.Error(err))
		}
	}
	if err := os.WriteFile(h.OOMScoreAdj, []byte(strconv.Itoa(int(*k.OOMScoreAdj))), 0); err != nil {
		logger.Info("Failed to ApplyOOMScoreAdj", zap.Error(err))
	}
	if h.ProcSys != procSys {
		logger.Warn("Kernel tunables are read and set in a test directory, not /proc/sys", zap.String("dir", h.ProcSys), zap.String("env", procSysTestEnv))
	}
	if err := setupKernelTunables(h.ProcSys, k.ProtectKernelDefaults, runningInUserNS(h.UIDMap), cfg.enabled(features.KubeletInUserNamespace), logger); err != nil {
		return fmt.Errorf("failed to start ContainerManager: %w", err)
	}
	return nil
}

// swapOn reports whether /proc/swaps lists a swap device or file (its first
// line is a header).
func swapOn(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("failSwapOn: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	lines := 0
	for s.Scan() {
		if strings.TrimSpace(s.Text()) != "" {
			lines++
		}
	}
	return lines > 1, s.Err()
}
