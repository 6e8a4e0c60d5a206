package app

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// intendedFlagDifferences are the only ways this kubelet's --help may differ
// from upstream's v1.37.1 (name, type, default, deprecation), each with its
// reason. TestIntegrationUpstreamFlags fails on any other difference, and on
// an entry here that no longer differs.
var intendedFlagDifferences = map[string]string{
	// The 1.23 kubelet's dockershim flags: upstream removed them with the
	// dockershim; this kubelet is the dockershim.
	"container-runtime":                            "dockershim flag (docker or remote)",
	"docker-endpoint":                              "dockershim flag",
	"pod-infra-container-image":                    "dockershim flag (upstream removed it; the shim's sandbox image)",
	"image-pull-progress-deadline":                 "dockershim flag",
	"network-plugin":                               "dockershim flag",
	"network-plugin-mtu":                           "dockershim flag",
	"cni-bin-dir":                                  "dockershim flag",
	"cni-conf-dir":                                 "dockershim flag",
	"cni-cache-dir":                                "dockershim flag",
	"experimental-dockershim":                      "this kubelet's shim-only mode",
	"experimental-dockershim-root-directory":       "dockershim flag (hidden in 1.23)",
	"experimental-dockershim-seccomp-profile-root": "deprecated, no effect (was this shim's Localhost seccomp profile root)",
	"cri-dockerd-root-directory":                   "where the shim reads cri-dockerd's checkpoints when it adopts its pods",
	"streaming-address":                            "where this shim's exec/attach/port-forward server binds",
	// The built-in shim's socket, not containerd's.
	"container-runtime-endpoint": "default is the built-in dockershim's socket",
	// Upstream's flag-only defaults serve the kubelet API to anyone
	// (anonymous auth, no webhook, AlwaysAllow) and open the
	// unauthenticated read-only port; this kubelet keeps the config file's
	// secure defaults whether or not --config is given.
	"anonymous-auth":               "secure default (false)",
	"authentication-token-webhook": "secure default (true)",
	"authorization-mode":           "secure default (Webhook)",
	"read-only-port":               "secure default (0, closed)",
	// Docker hosts still run cgroup v1 (Docker 20.10, this CI machine):
	// refusing it is opt-in here.
	"fail-cgroupv1": "default false",
}

// helpFlag is what --help says of one flag.
type helpFlag struct {
	typ, def, deprecated string
}

var (
	helpFlagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)(?: (\S+))?(?:\s{2,}(.*))?$`)
	helpDefault  = regexp.MustCompile(`\(default ([^)]*)\)`)
	helpDeprec   = regexp.MustCompile(`\(DEPRECATED: (.*)\)\s*$`)
)

// parseHelp reads the flags of a kubelet --help output (pflag's layout).
func parseHelp(t *testing.T, help string) map[string]helpFlag {
	t.Helper()
	usage := map[string]*strings.Builder{}
	types := map[string]string{}
	var cur *strings.Builder
	in := false
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "Flags:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if m := helpFlagLine.FindStringSubmatch(line); m != nil {
			cur = &strings.Builder{}
			cur.WriteString(m[3])
			usage[m[1]] = cur
			types[m[1]] = m[2]
			if types[m[1]] == "" {
				types[m[1]] = "bool"
			}
			continue
		}
		if cur != nil && strings.TrimSpace(line) != "" {
			cur.WriteString(" " + strings.TrimSpace(line))
		}
	}
	out := map[string]helpFlag{}
	for name, u := range usage {
		f := helpFlag{typ: types[name]}
		text := u.String()
		if m := helpDeprec.FindStringSubmatch(text); m != nil {
			f.deprecated = m[1]
			text = strings.TrimSuffix(text, m[0])
		}
		if m := helpDefault.FindStringSubmatch(text); m != nil {
			f.def = m[1]
		}
		out[name] = f
	}
	if len(out) < 50 {
		t.Fatalf("only %d flags parsed from:\n%s", len(out), help)
	}
	return out
}

// TestIntegrationUpstreamFlags diffs --help with that of upstream's kubelet
// v1.37.1 (built, cached, by scripts/build-controlplane.sh): every flag with
// its type, default and deprecation, except intendedFlagDifferences.
func TestIntegrationUpstreamFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := controlplane.UpstreamBinary(ctx, "upstream-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	upHelp, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	var out, errOut bytes.Buffer
	if err := Run(ctx, []string{"--help"}, &out, &errOut); err != nil {
		t.Fatalf("--help: %v (%s)", err, errOut.String())
	}
	upstream, ours := parseHelp(t, string(upHelp)), parseHelp(t, out.String())
	var names []string
	for n := range upstream {
		names = append(names, n)
	}
	for n := range ours {
		if _, ok := upstream[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		up, inUp := upstream[n]
		our, inOurs := ours[n]
		same := inUp && inOurs && up == our
		why, allowed := intendedFlagDifferences[n]
		switch {
		case same && allowed:
			t.Errorf("--%s: listed as an intended difference (%s) but matches upstream: remove it from the list", n, why)
		case same || allowed:
		case !inOurs:
			t.Errorf("--%s: upstream has it (%+v), this kubelet does not", n, up)
		case !inUp:
			t.Errorf("--%s: this kubelet has it (%+v), upstream does not", n, our)
		default:
			t.Errorf("--%s: upstream %+v, this kubelet %+v", n, up, our)
		}
	}
	for n := range intendedFlagDifferences {
		if _, ok := ours[n]; !ok {
			t.Errorf("--%s: an intended difference, but this kubelet has no such flag", n)
		}
	}
}
