package podresources

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's PodResources endpoint families (server_api_version
// is always v1 here).
type metrics struct {
	total, list, getAllocatable, get *prometheus.CounterVec
	listErrors, allocErrors, getErrs *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_pod_resources_endpoint_" + name, Help: "[ALPHA] " + help},
			[]string{"server_api_version"})
	}
	m := &metrics{
		total:          c("requests_total", "Cumulative number of requests to the PodResource endpoint. Broken down by server api version."),
		list:           c("requests_list", "Number of requests to the PodResource List endpoint. Broken down by server api version."),
		getAllocatable: c("requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version."),
		get:            c("requests_get", "Number of requests to the PodResource Get endpoint. Broken down by server api version."),
		listErrors:     c("errors_list", "Number of requests to the PodResource List endpoint which returned error. Broken down by server api version."),
		allocErrors:    c("errors_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint which returned error. Broken down by server api version."),
		getErrs:        c("errors_get", "Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version."),
	}
	if reg != nil {
		for _, v := range []*prometheus.CounterVec{m.total, m.list, m.getAllocatable, m.get, m.listErrors, m.allocErrors, m.getErrs} {
			if err := reg.Register(v); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
