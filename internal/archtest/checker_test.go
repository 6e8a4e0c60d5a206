package archtest

import (
	"reflect"
	"strings"
	"testing"
)

const fakeModule = "example.com/m"

func TestCheckGraph(t *testing.T) {
	t.Parallel()
	const (
		m        = fakeModule
		shim     = m + "/internal/dockershim"
		libdock  = shim + "/libdocker"
		network  = shim + "/network"
		kubelet  = m + "/internal/kubelet"
		runtime  = m + "/internal/kuberuntime"
		cri      = m + "/internal/cri"
		logging  = m + "/internal/logging"
		docker   = "github.com/docker/docker/client"
		cni      = "github.com/containernetworking/cni/libcni"
		clientgo = "k8s.io/client-go/kubernetes"
		kube     = "k8s.io/kubernetes/pkg/kubelet"
	)
	local := func(imports ...string) pkgNode { return pkgNode{Imports: imports, Local: true} }
	dep := func(imports ...string) pkgNode { return pkgNode{Imports: imports} }

	for _, tc := range []struct {
		desc  string
		graph importGraph
		want  []string // violation paths, joined by " -> "
	}{
		{
			desc: "clean layout as in docs/ARCHITECTURE.md",
			graph: importGraph{
				m + "/internal/app":    local(shim, kubelet, runtime, cri, logging),
				shim:                   local(libdock, network, logging, "k8s.io/cri-api/pkg/apis/runtime/v1"),
				libdock:                local(docker),
				network:                local(cni),
				kubelet:                local(kubelet+"/container", clientgo),
				kubelet + "/container": local(),
				runtime:                local(kubelet+"/container", cri),
				cri:                    local(logging),
				logging:                local(),
				docker:                 dep(),
				cni:                    dep(),
				clientgo:               dep(),
			},
		},
		{
			desc: "shim imports the kubelet side directly",
			graph: importGraph{
				shim + "/server": local(cri),
				cri:              local(),
			},
			want: []string{shim + "/server -> " + cri},
		},
		{
			desc: "shim reaches client-go through a third-party module",
			graph: importGraph{
				shim:                    local("example.org/lib"),
				"example.org/lib":       dep("example.org/lib/inner"),
				"example.org/lib/inner": dep(clientgo),
				clientgo:                dep(),
			},
			want: []string{shim + " -> example.org/lib -> example.org/lib/inner -> " + clientgo},
		},
		{
			desc: "client-go in the shim's tests is allowed, the kubelet side is not",
			graph: importGraph{
				shim + "/streaming": {Local: true, TestImports: []string{clientgo, cri}},
				cri:                 local(),
				clientgo:            dep(),
			},
			want: []string{shim + "/streaming -> " + cri},
		},
		{
			desc: "kubeletserver counts as kubelet side",
			graph: importGraph{
				shim:                          local(m + "/internal/kubeletserver"),
				m + "/internal/kubeletserver": local(),
			},
			want: []string{shim + " -> " + m + "/internal/kubeletserver"},
		},
		{
			desc: "kubelet side imports the shim through a local helper",
			graph: importGraph{
				runtime:           local(m + "/internal/x"),
				m + "/internal/x": local(libdock),
				libdock:           local(),
			},
			want: []string{runtime + " -> " + m + "/internal/x -> " + libdock},
		},
		{
			desc: "test files count as part of the package",
			graph: importGraph{
				kubelet + "/pleg": {Local: true, TestImports: []string{shim}},
				shim:              local(),
			},
			want: []string{kubelet + "/pleg -> " + shim},
		},
		{
			desc: "both halves may import the neutral leaf internal/cgroups",
			graph: importGraph{
				shim:                    local(m + "/internal/cgroups"),
				kubelet + "/stats":      local(m + "/internal/cgroups"),
				m + "/internal/cgroups": {Local: true, Imports: []string{"os"}, TestImports: []string{m + "/internal/cgroups"}},
			},
		},
		{
			desc: "internal/cgroups importing a package of the module is not a leaf",
			graph: importGraph{
				m + "/internal/cgroups": local(logging),
				logging:                 local(),
			},
			want: []string{m + "/internal/cgroups -> " + logging},
		},
		{
			desc: "kuberuntime may import the shared leaf kubelet/container, nothing else under kubelet",
			graph: importGraph{
				runtime:                local(kubelet+"/container", m+"/internal/x"),
				kubelet + "/container": local(),
				m + "/internal/x":      local(kubelet + "/status"),
				kubelet + "/status":    local(kubelet + "/container"),
			},
			want: []string{runtime + " -> " + m + "/internal/x -> " + kubelet + "/status"},
		},
		{
			desc: "the kubelet side reaches kuberuntime only in its tests",
			graph: importGraph{
				kubelet:                       {Local: true, Imports: []string{kubelet + "/runtimehelper"}, TestImports: []string{runtime}},
				kubelet + "/runtimehelper":    local(runtime),
				m + "/internal/kubeletserver": local(kubelet),
				runtime:                       local(),
			},
			want: []string{
				kubelet + " -> " + kubelet + "/runtimehelper -> " + runtime,
				kubelet + "/runtimehelper -> " + runtime,
				m + "/internal/kubeletserver -> " + kubelet + " -> " + kubelet + "/runtimehelper -> " + runtime,
			},
		},
		{
			desc: "kubelet/container and kubelet/resources are leaves (resources may read procfs)",
			graph: importGraph{
				kubelet + "/container": local(logging),
				kubelet + "/resources": local(m+"/internal/procfs", kubelet+"/container"),
				m + "/internal/procfs": local(),
				logging:                local(),
			},
			want: []string{
				kubelet + "/container -> " + logging,
				kubelet + "/resources -> " + kubelet + "/container",
			},
		},
		{
			desc: "test support only in tests",
			graph: importGraph{
				m + "/internal/app":                   {Local: true, Imports: []string{m + "/internal/testutil/controlplane"}},
				kubelet + "/status":                   {Local: true, TestImports: []string{m + "/internal/testutil/controlplane"}},
				m + "/internal/testutil/controlplane": {Local: true, Imports: []string{m + "/internal/testutil/testca"}},
				m + "/internal/testutil/testca":       local(),
			},
			want: []string{m + "/internal/app -> " + m + "/internal/testutil/controlplane"},
		},
		{
			desc: "docker outside libdocker, directly and in a test",
			graph: importGraph{
				shim:                local(docker),
				m + "/internal/app": {Local: true, TestImports: []string{"github.com/docker/docker/api/types"}},
				libdock:             {Local: true, Imports: []string{docker}, TestImports: []string{docker}},
			},
			want: []string{
				m + "/internal/app -> github.com/docker/docker/api/types",
				shim + " -> " + docker,
			},
		},
		{
			desc: "docker reached only transitively through libdocker is fine",
			graph: importGraph{
				shim:    local(libdock),
				libdock: local(docker),
				docker:  dep(),
			},
		},
		{
			desc: "libcni outside network",
			graph: importGraph{
				shim:    local(cni),
				network: local(cni),
			},
			want: []string{shim + " -> " + cni},
		},
		{
			desc: "k8s.io/kubernetes anywhere, even deep in a dependency",
			graph: importGraph{
				logging:         local("example.org/a"),
				"example.org/a": dep(kube),
				kube:            dep(),
			},
			want: []string{logging + " -> example.org/a -> " + kube},
		},
		{
			desc: "non-local packages are not constrained themselves",
			graph: importGraph{
				"example.org/a": dep(docker, cni, shim),
			},
		},
		{
			desc:  "missing directories do not matter",
			graph: importGraph{},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, v := range checkGraph(tc.graph, boundaryRules(m)) {
				got = append(got, strings.Join(v.Path, " -> "))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParseGoList(t *testing.T) {
	t.Parallel()
	const stream = `
{"ImportPath": "example.com/m/a", "Imports": ["fmt"], "TestImports": ["testing"], "XTestImports": ["example.com/m/b"], "Module": {"Main": true}}
{"ImportPath": "example.org/dep", "Imports": ["os"], "TestImports": ["never/used"], "Module": {"Main": false}}
{"ImportPath": "example.com/m/a [example.com/m/a.test]", "Imports": ["fmt", "testing"], "Module": {"Main": true}}
{"ImportPath": "example.com/m/a_test [example.com/m/a.test]", "Imports": ["example.com/m/b [example.com/m/a.test]"]}
{"ImportPath": "example.com/m/b [example.com/m/a.test]", "Imports": ["example.com/m/a [example.com/m/a.test]"], "Module": {"Main": true}}
{"ImportPath": "example.com/m/a.test", "Imports": ["example.com/m/a_test [example.com/m/a.test]"]}
`
	g, err := parseGoList(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := importGraph{
		"example.com/m/a": {Imports: []string{"fmt"}, TestImports: []string{"testing", "example.com/m/b"}, Local: true},
		"example.org/dep": {Imports: []string{"os"}},
		"example.com/m/b": {Imports: []string{"example.com/m/a"}},
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("graph:\n got %#v\nwant %#v", g, want)
	}
}
