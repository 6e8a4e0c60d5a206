package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrExpandUnsupported is returned when the driver lacks the EXPAND_VOLUME
// node capability (upstream's "NodeExpand is not supported by the CSI
// driver").
var ErrExpandUnsupported = errors.New("kubernetes.io/csi: NodeExpand is not supported by the CSI driver")

// ErrExpandInfeasible and ErrExpandInUse are the driver's answers upstream
// treats apart: a size it can never reach (InvalidArgument, OutOfRange,
// NotFound: the PVC is marked NodeResizeInfeasible) and a volume it cannot
// grow while in use (FailedPrecondition: tried again later).
var (
	ErrExpandInfeasible = errors.New("kubernetes.io/csi: expansion infeasible")
	ErrExpandInUse      = errors.New("kubernetes.io/csi: volume in use")
)

// Expansion is one NodeExpandVolume of a published volume.
type Expansion struct {
	Volume Volume
	// VolumePath is the pod's mount (filesystem) or publish file (block);
	// StagingPath the node's staging path ("" when the driver does not stage).
	VolumePath, StagingPath string
	Block                   bool
	NewSize                 int64
	Secrets                 map[string]string
}

// StagingPath is the staging path of a published filesystem volume ("" when
// it was not staged).
func (r *Registry) StagingPath(vol Volume) string {
	p := filepath.Join(r.stagingDir(vol.Driver, vol.VolumeHandle), globalMount)
	if r.isDone(p) {
		return p
	}
	return ""
}

// NodeExpand asks the driver to grow a published volume to e.NewSize
// (NodeExpandVolume with upstream's fields), serialised with the volume's
// other operations. The error wraps ErrExpandUnsupported, ErrExpandInUse or
// ErrExpandInfeasible when the driver says so.
func (r *Registry) NodeExpand(ctx context.Context, e Expansion) error {
	vol := e.Volume
	ctx, unlock, err := r.volumeOp(ctx, vol.Driver, vol.VolumeHandle)
	if err != nil {
		return err
	}
	defer unlock()
	nc, err := r.connect(ctx, vol.Driver, "Expander.NodeExpand failed")
	if err != nil {
		return err
	}
	defer nc.close()
	if !nc.caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return fmt.Errorf("%w %s", ErrExpandUnsupported, vol.Driver)
	}
	capability := volumeCapability(vol)
	if e.Block {
		capability = blockCapability(vol)
	}
	_, err = nc.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: vol.VolumeHandle, VolumePath: e.VolumePath,
		StagingTargetPath: e.StagingPath, CapacityRange: &csipb.CapacityRange{RequiredBytes: e.NewSize},
		VolumeCapability: capability, Secrets: e.Secrets})
	if err == nil {
		return nil
	}
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w: %w", ErrExpandInUse, err)
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound:
		return fmt.Errorf("Expander.NodeExpand failed to expand the volume %w: %w", ErrExpandInfeasible, err)
	}
	return fmt.Errorf("Expander.NodeExpand failed to expand the volume : %w", err)
}
