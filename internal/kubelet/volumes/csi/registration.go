// Package csi is the kubelet's side of CSI node plugins, after upstream's
// kubernetes.io/csi plugin.
//
// Registration (registration.go): the plugin watcher hands it each
// CSIPlugin socket; it checks the driver's versions, asks it NodeGetInfo and
// publishes it: the Node's csi.volume.kubernetes.io/nodeid annotation, the
// Node labels of its topology, and its entry in the node's CSINode object
// (created owned by the Node, with the migrated-plugins annotation). A
// driver whose socket goes away is removed from both.
//
// Volumes (volume.go): CSI PVs and inline (ephemeral) CSI volumes are
// staged once per node on upstream's global mount path (NodeStageVolume,
// when the driver stages) and published per pod on
// <pod>/volumes/kubernetes.io~csi/<name>/mount (NodePublishVolume), with
// upstream's vol_data.json files, CSIDriver rules (attachRequired and the
// VolumeAttachment, podInfoOnMount, volumeLifecycleModes, fsGroupPolicy)
// and secrets; torn down in the reverse order, the stage once no pod uses it.
package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelet-dockershim/kubelet/internal/keylock"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodepatch"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

const (
	// PluginName is upstream's CSI volume plugin.
	PluginName = "kubernetes.io/csi"
	// annotationNodeID maps driver names to their node IDs on the Node.
	annotationNodeID = "csi.volume.kubernetes.io/nodeid"
	// csiTimeout bounds each call to a driver: NodeGetInfo, and each
	// SetUp, TearDown and stats query as a whole (upstream's csiTimeout).
	csiTimeout = 2 * time.Minute
	// statsWait is how long a stats read waits for a driver's answer before
	// it goes on with the last one (or none); the query itself runs on, to
	// csiTimeout, and is not started again meanwhile.
	statsWait = 5 * time.Second
)

// migratedPlugins is the CSINode's migrated-plugins annotation: every in-tree
// plugin whose CSI migration is on in 1.37 (all of them, always).
var migratedPlugins = strings.Join([]string{
	"kubernetes.io/aws-ebs", "kubernetes.io/azure-disk", "kubernetes.io/azure-file", "kubernetes.io/cinder",
	"kubernetes.io/gce-pd", "kubernetes.io/portworx-volume", "kubernetes.io/vsphere-volume",
}, ",")

// Options configures a Registry.
type Options struct {
	// NodeName is the node's name (required).
	NodeName string
	// RootDir is the kubelet's root directory: volumes are staged under
	// RootDir/plugins/kubernetes.io/csi (required, absolute).
	RootDir string
	// Client updates the Node and its CSINode; nil (standalone): drivers
	// are only remembered.
	Client kubernetes.Interface
	Logger *zap.Logger
}

// Registry holds the registered CSI drivers.
type Registry struct {
	nodeName string
	rootDir  string
	client   kubernetes.Interface
	logger   *zap.Logger
	loops    lifecycle.Loops // what Start began

	opTimeout time.Duration // csiTimeout; shorter in tests
	statsWait time.Duration // statsWait; shorter in tests
	// volumes serialises the operations on one volume (driver and handle):
	// one volume's stuck driver call never blocks another volume.
	volumes keylock.Locks

	// nodeMu makes each read, change and patch of the Node one step.
	nodeMu sync.Mutex

	mu      sync.Mutex
	drivers map[string]driver
	done    map[string]bool // staging and target paths set up by this process
	usage   map[string]*volumeUsage
}

type driver struct {
	endpoint string
	version  *utilversion.Version
}

// NewRegistry checks opts.
func NewRegistry(opts Options) (*Registry, error) {
	if opts.NodeName == "" || !filepath.IsAbs(opts.RootDir) {
		return nil, errors.New("csi: Options.NodeName and an absolute RootDir are required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Registry{nodeName: opts.NodeName, rootDir: filepath.Clean(opts.RootDir), client: opts.Client, logger: opts.Logger,
		opTimeout: csiTimeout, statsWait: statsWait,
		drivers: map[string]driver{}, done: map[string]bool{}, usage: map[string]*volumeUsage{}}, nil
}

// Endpoint returns where a registered driver serves CSI.
func (r *Registry) Endpoint(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	return d.endpoint, ok
}

func logf(format string, args ...any) string {
	return fmt.Sprintf(PluginName+": "+format, args...)
}

// validateVersions is upstream's check: a 1.x version, higher than that of a
// driver of the same name already registered.
func (r *Registry) validateVersions(caller, name string, versions []string) (*utilversion.Version, error) {
	if err := checkDriverName(name); err != nil {
		return nil, errors.New(logf("%s for CSI driver %q failed. %v", caller, name, err))
	}
	if len(versions) == 0 {
		return nil, errors.New(logf("%s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name))
	}
	v, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, errors.New(logf("%s for CSI driver %q failed. None of the versions specified %q are supported. err=%v", caller, name, versions, err))
	}
	r.mu.Lock()
	existing, ok := r.drivers[name]
	r.mu.Unlock()
	if ok && !existing.version.LessThan(v) {
		return nil, errors.New(logf("%s for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", caller, name, existing.version))
	}
	return v, nil
}

// maxDriverNameLength is the CSI spec's bound on a driver name.
const maxDriverNameLength = 63

// checkDriverName accepts the driver names the API server accepts for a
// CSIDriver (a DNS subdomain in any case, at most 63 characters, as the CSI
// spec asks): a name names the driver's directory under the staging root,
// so "..", "/" or an empty name must never get that far.
func checkDriverName(name string) error {
	if name == "" {
		return errors.New("the driver name is empty")
	}
	if len(name) > maxDriverNameLength {
		return fmt.Errorf("the driver name is longer than %d characters", maxDriverNameLength)
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(errs) > 0 {
		return fmt.Errorf("the driver name is invalid: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ValidatePlugin checks a CSI driver's registration.
func (r *Registry) ValidatePlugin(name, _ string, versions []string) error {
	_, err := r.validateVersions("ValidatePlugin", name, versions)
	return err
}

// RegisterPlugin records the driver, asks it NodeGetInfo and publishes it on
// the Node and CSINode.
func (r *Registry) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	v, err := r.validateVersions("RegisterPlugin", name, versions)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.drivers[name] = driver{endpoint: endpoint, version: v}
	r.mu.Unlock()
	fail := func(err error) error {
		r.mu.Lock()
		delete(r.drivers, name)
		r.mu.Unlock()
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	info, err := nodeGetInfo(cctx, endpoint)
	if err != nil {
		return fail(errors.New(logf("failed when collecting driver info for driver %q: %v", name, err)))
	}
	if err := r.install(ctx, name, info); err != nil {
		return fail(errors.New(logf("failed to install driver %q: %v", name, err)))
	}
	r.logger.Info("Registered CSI driver", zap.String("driver", name), zap.String("endpoint", endpoint), zap.String("nodeID", info.GetNodeId()))
	return nil
}

// DeRegisterPlugin forgets the driver and removes it from the Node and CSINode.
func (r *Registry) DeRegisterPlugin(name, _ string) {
	r.mu.Lock()
	delete(r.drivers, name)
	r.mu.Unlock()
	if err := r.uninstall(context.Background(), name); err != nil {
		r.logger.Error("Remove the CSI driver from the node", zap.String("driver", name), zap.Error(err))
	}
}

// nodeGetInfo asks a driver who it is on this node.
func nodeGetInfo(ctx context.Context, endpoint string) (*csipb.NodeGetInfoResponse, error) {
	conn, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := csipb.NewNodeClient(conn).NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return nil, err
	}
	if resp.GetNodeId() == "" {
		return nil, errors.New("error adding CSI driver node info: driverNodeID must not be empty")
	}
	return resp, nil
}

// dial connects to a driver's unix socket (a path, or unix://path).
func dial(endpoint string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+strings.TrimPrefix(endpoint, "unix://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// install publishes the driver: the Node's node ID annotation and topology
// labels, then its CSINode entry.
func (r *Registry) install(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error {
	if r.client == nil {
		return nil
	}
	topology := info.GetAccessibleTopology().GetSegments()
	err := r.updateNode(ctx, func(node *v1.Node) error {
		ids, err := nodeIDs(node)
		if err != nil {
			return err
		}
		ids[name] = info.GetNodeId()
		b, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[annotationNodeID] = string(b)
		for k, v := range topology {
			if cur, ok := node.Labels[k]; ok && cur != v {
				return fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur)
			}
		}
		if len(topology) > 0 && node.Labels == nil {
			node.Labels = map[string]string{}
		}
		for k, v := range topology {
			node.Labels[k] = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("error updating Node object with CSI driver node info: %w", err)
	}
	keys := sets.List(sets.KeySet(topology))
	if err := r.updateCSINode(ctx, func(cn *storagev1.CSINode) {
		d := storagev1.CSINodeDriver{Name: name, NodeID: info.GetNodeId(), TopologyKeys: keys}
		if n := info.GetMaxVolumesPerNode(); n > 0 {
			c := int32(n)
			d.Allocatable = &storagev1.VolumeNodeResources{Count: &c}
		}
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(x storagev1.CSINodeDriver) bool { return x.Name == name })
		cn.Spec.Drivers = append(cn.Spec.Drivers, d)
	}); err != nil {
		return fmt.Errorf("error updating CSINode object with CSI driver node info: %w", err)
	}
	return nil
}

// uninstall removes the driver's CSINode entry and node ID annotation.
func (r *Registry) uninstall(ctx context.Context, name string) error {
	if r.client == nil {
		return nil
	}
	if err := r.updateCSINode(ctx, func(cn *storagev1.CSINode) {
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(x storagev1.CSINodeDriver) bool { return x.Name == name })
	}); err != nil {
		return fmt.Errorf("error uninstalling CSI driver from CSINode object %w", err)
	}
	return r.updateNode(ctx, func(node *v1.Node) error {
		ids, err := nodeIDs(node)
		if err != nil {
			return err
		}
		delete(ids, name)
		if len(ids) == 0 {
			delete(node.Annotations, annotationNodeID)
			return nil
		}
		b, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		node.Annotations[annotationNodeID] = string(b)
		return nil
	})
}

func nodeIDs(node *v1.Node) (map[string]string, error) {
	ids := map[string]string{}
	if v := node.Annotations[annotationNodeID]; v != "" {
		if err := json.Unmarshal([]byte(v), &ids); err != nil {
			return nil, fmt.Errorf("failed to parse node's %q annotation value (%q) err=%v", annotationNodeID, v, err)
		}
	}
	return ids, nil
}

// nodeUpdateBackoff is upstream's updateBackoff for the Node's CSI
// annotation and labels.
var nodeUpdateBackoff = wait.Backoff{Steps: 4, Duration: 10 * time.Millisecond, Factor: 5.0, Jitter: 0.1}

// updateNode applies change to the Node and sends the difference as a patch
// of its status subresource, as upstream's nodeinfomanager does: an Update
// would send back taints read before a controller changed them, which the
// NodeRestriction admission plugin refuses ("not allowed to modify taints").
// The node ID annotation is one JSON value for every driver: the read, the
// change and the patch are one step under nodeMu, so that two drivers
// registering at once keep each other's ID. Any failure is tried again with
// upstream's back-off; nothing is sent when nothing changed.
func (r *Registry) updateNode(ctx context.Context, change func(*v1.Node) error) error {
	var errs []error
	err := wait.ExponentialBackoffWithContext(ctx, nodeUpdateBackoff, func(ctx context.Context) (bool, error) {
		if err := r.tryUpdateNode(ctx, change); err != nil {
			errs = append(errs, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("error updating node: %v; caused by: %v", err, utilerrors.NewAggregate(errs))
	}
	return nil
}

func (r *Registry) tryUpdateNode(ctx context.Context, change func(*v1.Node) error) error {
	r.nodeMu.Lock()
	defer r.nodeMu.Unlock()
	nodes := r.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, r.nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	updated := node.DeepCopy()
	if err := change(updated); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(node, updated) {
		return nil
	}
	_, err = nodepatch.Status(ctx, nodes, node, updated)
	return err
}

// updateCSINode applies change to the node's CSINode (created, owned by
// the Node, when missing) and updates it, retrying with back-off.
func (r *Registry) updateCSINode(ctx context.Context, change func(*storagev1.CSINode)) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 6}, func(ctx context.Context) (bool, error) {
		if last = r.tryUpdateCSINode(ctx, change); last != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; caused by: %v", err, last)
	}
	return nil
}

func (r *Registry) tryUpdateCSINode(ctx context.Context, change func(*storagev1.CSINode)) error {
	csiNodes := r.client.StorageV1().CSINodes()
	cn, err := csiNodes.Get(ctx, r.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cn, err = r.createCSINode(ctx)
	}
	if err != nil {
		return err
	}
	change(cn)
	_, err = csiNodes.Update(ctx, cn, metav1.UpdateOptions{})
	return err
}

// createCSINode creates the node's CSINode, owned by its Node.
func (r *Registry) createCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	node, err := r.client.CoreV1().Nodes().Get(ctx, r.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name:            r.nodeName,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: r.nodeName, UID: node.UID}},
			Annotations:     map[string]string{v1.MigratedPluginsAnnotationKey: migratedPlugins},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	return r.client.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{})
}

// Start creates the node's CSINode in the background (InitializeCSINode)
// until it succeeds or ctx ends (Wait waits for that).
func (r *Registry) Start(ctx context.Context) error {
	r.loops.Go(r.logger, "CSINode initialization", func() { r.InitializeCSINode(ctx) })
	return nil
}

// Wait returns once the work Start began has ended.
func (r *Registry) Wait() { r.loops.Wait() }

// InitializeCSINode creates the node's CSINode (with the migrated-plugins
// annotation) if it does not exist yet, as upstream does at start-up once the
// Node is registered; it retries until ctx ends or it succeeds.
func (r *Registry) InitializeCSINode(ctx context.Context) {
	if r.client == nil {
		return
	}
	_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := r.client.StorageV1().CSINodes().Get(ctx, r.nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = r.createCSINode(ctx)
		}
		if err != nil {
			r.logger.Debug("Initialize the CSINode", zap.Error(err))
			return false, nil
		}
		return true, nil
	})
}
