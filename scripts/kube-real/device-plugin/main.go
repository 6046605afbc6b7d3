// A device plugin for the node tier (scripts/test-kube-node.sh): it advertises devices to a real
// kubelet through the v1beta1 device-plugin API, from the kubelet's own API package, under the
// names NVIDIA's device plugin uses (docs/kubernetes-real-node.md): `nvidia.com/gpu` with GPU
// UUIDs, time-slicing or MPS replicas `<uuid>::<n>` (also as `nvidia.com/gpu.shared`), MIG
// resources `nvidia.com/mig-<profile>` with MIG UUIDs. It touches no GPU: the devices are the
// fake NVML scenario's, and Allocate only names them in NVIDIA_VISIBLE_DEVICES.
//
//	tessera-device-plugin -config devices.json [-dir /var/lib/kubelet/device-plugins]
//
// devices.json: {"resources": [{"name": "nvidia.com/gpu", "devices": ["GPU-…"]}, …]}. The plugin
// reads it again when it changes, and registers again when the kubelet's socket is recreated (a
// kubelet restart), as a real plugin must: each time it stops every endpoint and starts anew.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type resource struct {
	Name    string   `json:"name"`
	Devices []string `json:"devices"`
}

type config struct {
	Resources []resource `json:"resources"`
}

// endpoint serves one resource name on its own socket, as the kubelet expects.
type endpoint struct {
	pluginapi.UnimplementedDevicePluginServer
	res    resource
	socket string
	server *grpc.Server
	stop   chan struct{}
}

func (e *endpoint) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (e *endpoint) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	devices := make([]*pluginapi.Device, 0, len(e.res.Devices))
	for _, id := range e.res.Devices {
		devices = append(devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
		return err
	}
	// The list never changes while this endpoint lives; a new config gets a new endpoint.
	select {
	case <-e.stop:
	case <-stream.Context().Done():
	}
	return nil
}

func (e *endpoint) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := strings.Join(c.DevicesIds, ",")
		log.Printf("allocate %s: %s", e.res.Name, ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": ids},
		})
	}
	return resp, nil
}

func (e *endpoint) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (e *endpoint) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (e *endpoint) start(dir string) error {
	e.socket = filepath.Join(dir, "tessera-"+strings.NewReplacer("/", "_", ".", "_").Replace(e.res.Name)+".sock")
	_ = os.Remove(e.socket)
	l, err := net.Listen("unix", e.socket)
	if err != nil {
		return err
	}
	e.server = grpc.NewServer()
	e.stop = make(chan struct{})
	pluginapi.RegisterDevicePluginServer(e.server, e)
	go func() { _ = e.server.Serve(l) }()
	return nil
}

func (e *endpoint) close() {
	close(e.stop)
	e.server.Stop()
	_ = os.Remove(e.socket)
}

func register(dir string, e *endpoint) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(e.socket),
		ResourceName: e.res.Name,
	})
	return err
}

func readConfig(path string) (config, error) {
	var c config
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// state is what a change of either means starting over: the config's text and the kubelet
// socket's inode.
func state(configPath, kubeletSock string) string {
	raw, _ := os.ReadFile(configPath)
	var inode uint64
	if fi, err := os.Stat(kubeletSock); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			inode = st.Ino
		}
	}
	return fmt.Sprintf("%d:%s", inode, raw)
}

func main() {
	configPath := flag.String("config", "", "devices.json")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	flag.Parse()
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "tessera-device-plugin: -config is required")
		os.Exit(2)
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	kubeletSock := filepath.Join(*dir, "kubelet.sock")
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)

	var running []*endpoint
	stopAll := func() {
		for _, e := range running {
			e.close()
		}
		running = nil
	}
	last := ""
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if now := state(*configPath, kubeletSock); now != last && !strings.HasPrefix(now, "0:") {
			stopAll()
			c, err := readConfig(*configPath)
			if err != nil {
				log.Printf("config: %v", err)
			}
			ok := err == nil
			for _, r := range c.Resources {
				e := &endpoint{res: r}
				if err := e.start(*dir); err != nil {
					log.Printf("serve %s: %v", r.Name, err)
					ok = false
					continue
				}
				running = append(running, e)
				if err := register(*dir, e); err != nil {
					log.Printf("register %s: %v", r.Name, err)
					ok = false
					continue
				}
				log.Printf("registered %s: %d devices", r.Name, len(r.Devices))
			}
			// A failed round is tried again at the next tick.
			if ok {
				last = now
			}
		}
		select {
		case <-signals:
			stopAll()
			return
		case <-tick.C:
		}
	}
}
