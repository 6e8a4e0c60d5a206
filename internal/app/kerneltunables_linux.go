package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// kernelTunables are the kernel settings upstream's kubelet wants (its
// setupKernelTunables), by /proc/sys path: overcommit always, the OOM killer
// rather than a panic on OOM, reboot 10 s after a panic, a panic on an oops,
// and room for a key per container in root's keyring. In upstream's order.
var kernelTunables = []struct {
	name  string
	value int
}{
	{"vm/overcommit_memory", 1},
	{"vm/panic_on_oom", 0},
	{"kernel/panic", 10},
	{"kernel/panic_on_oops", 1},
	{"kernel/keys/root_maxkeys", 1000000},
	{"kernel/keys/root_maxbytes", 25000000},
}

// procSysTestEnv names the environment variable that moves /proc/sys for
// this process's kernel tunables: test support only, so that the tests'
// kubelets (run at protectKernelDefaults' default, false) write a fake
// directory instead of the shared test machine's kernel.
const procSysTestEnv = "KUBELET_DOCKERSHIM_TEST_PROC_SYS"

// runningInUserNS reports whether this process is in a user namespace other
// than the initial one: its uid_map is not the whole identity mapping.
func runningInUserNS(uidMap string) bool {
	b, err := os.ReadFile(uidMap)
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return !(len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295")
}

// procSys is where the kernel tunables live.
const procSys = "/proc/sys"

// procSysDir is procSys, or the test directory procSysTestEnv names.
func procSysDir() string {
	if d := os.Getenv(procSysTestEnv); d != "" {
		return d
	}
	return procSys
}

// setupKernelTunables does what upstream's container manager does at start:
// with protectKernelDefaults a tunable that differs is an error naming it
// (the kubelet does not start); without, it is set, and a failure to set it
// is an error too, except in a user namespace with inUserNSOK (the gate
// KubeletInUserNamespace), where it is logged.
func setupKernelTunables(dir string, protect, inUserNS, inUserNSOK bool, logger *zap.Logger) error {
	var errs []error
	for _, kt := range kernelTunables {
		path := filepath.Join(dir, kt.name)
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		val, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if val == kt.value {
			continue
		}
		if protect {
			errs = append(errs, fmt.Errorf("invalid kernel flag: %v, expected value: %v, actual value: %v", kt.name, kt.value, val))
			continue
		}
		logger.Info("Updating kernel flag", zap.String("flag", kt.name), zap.Int("expectedValue", kt.value), zap.Int("actualValue", val))
		if err := os.WriteFile(path, []byte(strconv.Itoa(kt.value)), 0o640); err != nil {
			if inUserNS && inUserNSOK {
				logger.Info("Updating kernel flag failed (running in UserNS, ignoring)", zap.String("flag", kt.name), zap.Error(err))
				continue
			}
			if inUserNS {
				logger.Error("Updating kernel flag failed (Hint: enable KubeletInUserNamespace feature flag to ignore the error)", zap.String("flag", kt.name), zap.Error(err))
			}
			errs = append(errs, err)
		}
	}
	return aggregate(errs)
}

// aggregate joins errors as upstream's utilerrors.NewAggregate prints them:
// one alone as itself, several as "[a, b]".
func aggregate(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return aggregateError(errs)
}

type aggregateError []error

func (a aggregateError) Error() string {
	msgs := make([]string, len(a))
	for i, e := range a {
		msgs[i] = e.Error()
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

func (a aggregateError) Unwrap() []error { return a }
