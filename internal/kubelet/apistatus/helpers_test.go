package apistatus

import "github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"

var staticPod = podtest.StaticPod

func ptr[T any](v T) *T { return podtest.Ptr(v) }
