package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func TestExpandVars(t *testing.T) {
	t.Parallel()
	envs := []kubecontainer.EnvVar{{Name: "A", Value: "alpha"}, {Name: "B", Value: "beta"}, {Name: "EMPTY", Value: ""},
		{Name: "DUP", Value: "first"}, {Name: "DUP", Value: "last"}}
	lookup := envLookup(envs)
	for _, tc := range []struct {
		desc, in, want string
	}{
		{desc: "no reference", in: "plain text", want: "plain text"},
		{desc: "one reference", in: "$(A)", want: "alpha"},
		{desc: "references inside text", in: "x$(A)-$(B)y", want: "xalpha-betay"},
		{desc: "adjacent references", in: "$(A)$(B)", want: "alphabeta"},
		{desc: "empty value", in: "[$(EMPTY)]", want: "[]"},
		{desc: "last duplicate wins", in: "$(DUP)", want: "last"},
		{desc: "undefined kept as written", in: "$(NOPE) and $(A)", want: "$(NOPE) and alpha"},
		{desc: "escaped operator", in: "$$(A)", want: "$(A)"},
		{desc: "double escape then reference", in: "$$$(A)", want: "$alpha"},
		{desc: "lone dollar", in: "cost: $5", want: "cost: $5"},
		{desc: "shell variable untouched", in: "echo $HOME", want: "echo $HOME"},
		{desc: "trailing dollar", in: "abc$", want: "abc$"},
		{desc: "unterminated reference", in: "$(A", want: "$(A"},
		{desc: "unterminated then a reference", in: "$($(A)", want: "$($(A)"},
		{desc: "empty name", in: "$()", want: "$()"},
		{desc: "double dollar alone", in: "$$", want: "$"},
		{desc: "nested parenthesis ends at first close", in: "$(A))", want: "alpha)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := kubecontainer.Expand(tc.in, lookup); got != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExpandCommandAndArgs(t *testing.T) {
	t.Parallel()
	envs := []kubecontainer.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "MSG", Value: "hello world"}}
	for _, tc := range []struct {
		desc                 string
		container            v1.Container
		wantCommand, wantArg []string
	}{
		{desc: "nil stays nil (the image's entrypoint applies)", container: v1.Container{}},
		{
			desc:        "command and args expanded",
			container:   v1.Container{Command: []string{"httpd", "-p", "$(PORT)"}, Args: []string{"$(MSG)", "$$(MSG)", "$(UNSET)"}},
			wantCommand: []string{"httpd", "-p", "8080"},
			wantArg:     []string{"hello world", "$(MSG)", "$(UNSET)"},
		},
		{desc: "empty slice stays empty", container: v1.Container{Args: []string{}}, wantArg: []string{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cmd, args := expandCommandAndArgs(&tc.container, envs)
			if !reflect.DeepEqual(cmd, tc.wantCommand) || !reflect.DeepEqual(args, tc.wantArg) {
				t.Errorf("got %#v %#v, want %#v %#v", cmd, args, tc.wantCommand, tc.wantArg)
			}
		})
	}
}
