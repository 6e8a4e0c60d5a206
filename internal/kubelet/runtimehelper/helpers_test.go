package runtimehelper

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

// fixedAllocatable is a node whose allocatable never changes.
type fixedAllocatable v1.ResourceList

func (a fixedAllocatable) Allocatable() v1.ResourceList { return v1.ResourceList(a) }

type fakeDNS struct{}

func (fakeDNS) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}}, nil
}

var staticPod = podtest.StaticPod

func ptr[T any](v T) *T { return podtest.Ptr(v) }
