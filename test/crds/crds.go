package crds

import (
	"embed"
	"fmt"
)

// Group is the API group of the project's own CRDs.
const Group = "edge.example.com"

// Files of the project's own CRDs, for YAML.
const (
	// Edge holds four CRDs as one multi-document YAML file: GatewayClass
	// (cluster-scoped), Gateway, Route and BackendGrant (namespaced).
	Edge = "edge.example.com.yaml"
	// EdgeProxy holds the EdgeProxy CRD, whose v1 schema embeds a complete
	// PodTemplateSpec (generated; see testdata/README.md).
	EdgeProxy = "edgeproxies.edge.example.com.yaml"
)

//go:embed testdata/*.yaml
var files embed.FS

// YAML returns the contents of one of the project's CRD files (Edge or
// EdgeProxy). An unknown name is an error.
func YAML(name string) ([]byte, error) {
	data, err := files.ReadFile("testdata/" + name)
	if err != nil {
		return nil, fmt.Errorf("crds: no project CRD file %q: %w", name, err)
	}
	return data, nil
}
