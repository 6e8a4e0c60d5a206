package network

import (
	"context"
	"errors"
	"sync"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// fakeCNI records calls; methods a test does not set fail loudly through the
// embedded nil interface.
type fakeCNI struct {
	libcni.CNI

	mu          sync.Mutex
	validations int
	validateErr error
	addErr      error
	addResult   cnitypes.Result
	// onAdd runs at the start of AddNetworkList.
	onAdd       func()
	attachments []*libcni.NetworkAttachment
	dels        []fakeDel
}

type fakeDel struct {
	network string
	rt      libcni.RuntimeConf
	ctxErr  error
}

func (f *fakeCNI) ValidateNetworkList(context.Context, *libcni.NetworkConfigList) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validations++
	return nil, f.validateErr
}

func (f *fakeCNI) GetVersionInfo(context.Context, string) (version.PluginInfo, error) {
	return version.PluginSupports("0.4.0", "1.0.0"), nil
}

func (f *fakeCNI) AddNetwork(context.Context, *libcni.PluginConfig, *libcni.RuntimeConf) (cnitypes.Result, error) {
	return nil, nil
}

func (f *fakeCNI) DelNetwork(context.Context, *libcni.PluginConfig, *libcni.RuntimeConf) error {
	return nil
}

func (f *fakeCNI) AddNetworkList(ctx context.Context, _ *libcni.NetworkConfigList, _ *libcni.RuntimeConf) (cnitypes.Result, error) {
	if f.onAdd != nil {
		f.onAdd()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.addErr != nil {
		return nil, f.addErr
	}
	if f.addResult == nil {
		return nil, errors.New("fake: no result configured")
	}
	return f.addResult, nil
}

func (f *fakeCNI) DelNetworkList(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dels = append(f.dels, fakeDel{network: list.Name, rt: *rt, ctxErr: ctx.Err()})
	return nil
}

func (f *fakeCNI) GetCachedAttachments(string) ([]*libcni.NetworkAttachment, error) {
	return f.attachments, nil
}

func (f *fakeCNI) delCalls() []fakeDel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeDel(nil), f.dels...)
}

func (f *fakeCNI) validateCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.validations
}
