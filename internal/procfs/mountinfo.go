package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of /proc/*/mountinfo: "id parent major:minor root mountpoint
// options [optional fields...] - fstype source superoptions".
type Mount struct {
	Major, Minor uint64
	Root         string // the mount's root within its filesystem
	MountPoint   string
	FSType       string
	Source       string
}

// ReadMountinfo reads and parses a mountinfo file (/proc/self/mountinfo).
func ReadMountinfo(path string) ([]Mount, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ParseMountinfo(data)
}

// ParseMountinfo parses a mountinfo file, paths unescaped. A malformed line is
// an error naming it.
func ParseMountinfo(data []byte) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		m := Mount{Root: UnescapeMountinfo(fields[3]), MountPoint: UnescapeMountinfo(fields[4]), FSType: fields[sep+1]}
		if sep+2 < len(fields) {
			m.Source = UnescapeMountinfo(fields[sep+2])
		}
		maj, min, _ := strings.Cut(fields[2], ":")
		m.Major, _ = strconv.ParseUint(maj, 10, 32)
		m.Minor, _ = strconv.ParseUint(min, 10, 32)
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse mountinfo: %w", err)
	}
	return out, nil
}
