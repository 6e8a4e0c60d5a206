package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cgroupLayer is the one package that may name cgroup files and the cgroup
// mount (docs/ARCHITECTURE.md).
const cgroupLayer = "internal/cgroups"

// cgroupFiles are the cgroup files the kubelet and the dockershim read or
// write, and the mount of the hierarchies. Matched exactly, as a whole
// string literal or its last path element, so that "memory.available" (an
// eviction signal) or "io.kubernetes.pod.name" (a label) do not count.
var cgroupFiles = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		/sys/fs/cgroup
		cgroup.procs cgroup.controllers cgroup.subtree_control cgroup.event_control cgroup.clone_children
		cpu.shares cpu.cfs_period_us cpu.cfs_quota_us cpu.weight cpu.max cpu.stat
		cpuacct.usage cpuacct.stat cpuset.cpus cpuset.mems
		memory.limit_in_bytes memory.usage_in_bytes memory.max memory.current memory.min memory.low
		memory.stat memory.max_usage_in_bytes memory.failcnt memory.oom_control
		memory.memsw.limit_in_bytes memory.soft_limit_in_bytes
		pids.max pids.current
		blkio.io_service_bytes_recursive blkio.throttle.io_service_bytes_recursive
		/proc/self/cgroup`) {
		cgroupFiles[f] = true
	}
}

// cgroupFileLiterals are the string literals of the Go file f that name a
// cgroup file or the cgroup mount, as "file:line: literal".
func cgroupFileLiterals(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		if cgroupFiles[v] || cgroupFiles[v[strings.LastIndex(v, "/")+1:]] {
			out = append(out, fset.Position(lit.Pos()).String()+": "+strconv.Quote(v))
		}
		return true
	})
	return out
}

// TestCgroupFilesOnlyInCgroupLayer: no product Go file outside
// internal/cgroups names a cgroup file or the cgroup mount; the layer is
// the one place that reads and writes them (tests may, to check what was
// written).
func TestCgroupFilesOnlyInCgroupLayer(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	for _, f := range productGoFiles(t, fset, cgroupLayer) {
		found = append(found, cgroupFileLiterals(fset, f)...)
		found = append(found, cgroupMountReaders(fset, f)...)
	}
	for _, f := range found {
		t.Errorf("%s: a cgroup file named outside %s (read or write it through the layer)", f, cgroupLayer)
	}
}

// productGoFiles are the product Go files below internal, parsed: neither
// tests nor internal/testutil, nor what lies below the module-relative
// directories skip names.
func productGoFiles(t *testing.T, fset *token.FileSet, skip ...string) []*ast.File {
	t.Helper()
	root := filepath.Join("..", "..")
	skip = append(skip, filepath.Join("internal", "testutil"))
	var out []*ast.File
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains(skip, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		out = append(out, parseGo(t, fset, path))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseGo(t *testing.T, fset *token.FileSet, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// cgroupMountReaders are the calls of the Go file f to the layer's
// parsers of mountinfo and /proc/<pid>/cgroup: outside the layer, where the
// hierarchies are and which cgroup a process is in come from a cgroups.Host.
func cgroupMountReaders(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cgroups" {
			switch sel.Sel.Name {
			case "ParseMountinfo", "ParseProcCgroup", "Resolve":
				out = append(out, fset.Position(sel.Pos()).String()+": cgroups."+sel.Sel.Name+" (use a cgroups.Host)")
			}
		}
		return true
	})
	return out
}

// TestCgroupFileLiterals: the matching counts whole literals and last path
// elements, not look-alikes.
func TestCgroupFileLiterals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	src := "package x\n\nvar a = []string{\"memory.available\", \"io.kubernetes.pod.name\", \"cpu.shares\", \"/x/y/cgroup.procs\", \"/sys/fs/cgroup\", \"cpu.shares.bak\"}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	got := cgroupFileLiterals(fset, parseGo(t, fset, path))
	if len(got) != 3 || !strings.HasSuffix(got[0], `"cpu.shares"`) || !strings.HasSuffix(got[1], `"/x/y/cgroup.procs"`) ||
		!strings.HasSuffix(got[2], `"/sys/fs/cgroup"`) {
		t.Errorf("found %q, want cpu.shares, /x/y/cgroup.procs and /sys/fs/cgroup", got)
	}
}
