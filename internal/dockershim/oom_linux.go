package dockershim

import (
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

const oomScoreAdjPath = "/proc/self/oom_score_adj"

// detectMinOOMScoreAdj finds the lowest oom_score_adj this host lets the shim give a
// container. Without CAP_SYS_RESOURCE (nested containers, some VMs) the kernel refuses
// to lower a score below the caller's own, and runc then fails every container asking
// for a negative one; containerd's restrict_oom_score_adj clamps to the caller's own
// score in that case, and so does the shim. The probe lowers this process's own score
// by one and restores it.
func detectMinOOMScoreAdj(logger *zap.Logger) int {
	cur, err := readOOMScoreAdj()
	if err != nil {
		logger.Warn("cannot read own oom_score_adj; not clamping", zap.Error(err))
		return -1000
	}
	if cur <= -1000 {
		return -1000
	}
	if err := os.WriteFile(oomScoreAdjPath, []byte(strconv.Itoa(cur-1)), 0); err != nil {
		logger.Info("host refuses lower oom_score_adj; clamping container scores",
			zap.Int("min-oom-score-adj", cur), zap.Error(err))
		return cur
	}
	if err := os.WriteFile(oomScoreAdjPath, []byte(strconv.Itoa(cur)), 0); err != nil {
		logger.Warn("restore own oom_score_adj", zap.Error(err))
	}
	return -1000
}

func readOOMScoreAdj() (int, error) {
	b, err := os.ReadFile(oomScoreAdjPath)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// clampOOMScoreAdj raises score to the host's floor.
func clampOOMScoreAdj(score int64, floor int) int {
	if score < int64(floor) {
		return floor
	}
	if score > 1000 {
		return 1000
	}
	return int(score)
}
