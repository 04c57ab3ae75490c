package decodetest

import (
	"encoding/json"
	"fmt"
)

const lastAppliedKey = "kubectl.kubernetes.io/last-applied-configuration"

// ServerObject returns the JSON of an object shaped like what an API server
// returns for a workload custom resource written by server-side apply:
// labels, annotations (one a last-applied configuration), a nested spec,
// a status with conditions, and managedFields describing every field.
// About 7 KB.
func ServerObject(i int) []byte {
	containers := []interface{}{}
	for c := 0; c < 3; c++ {
		env := []interface{}{}
		for e := 0; e < 4; e++ {
			env = append(env, map[string]interface{}{"name": fmt.Sprintf("ENV_VAR_%d", e), "value": fmt.Sprintf("value-%d-%d-%d", i, c, e)})
		}
		containers = append(containers, map[string]interface{}{
			"name": fmt.Sprintf("container-%d", c), "image": fmt.Sprintf("registry.example.com/team/image-%d:v1.%d.%d", c, i%10, c),
			"args": []interface{}{"--verbose", "--port=8080", fmt.Sprintf("--id=%d", i)}, "env": env,
			"ports":     []interface{}{map[string]interface{}{"containerPort": 8080, "protocol": "TCP"}},
			"resources": map[string]interface{}{"requests": map[string]interface{}{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]interface{}{"cpu": "500m", "memory": "512Mi"}},
		})
	}
	config := map[string]interface{}{}
	for k := 0; k < 12; k++ {
		config[fmt.Sprintf("setting%02d", k)] = fmt.Sprintf("setting-%02d-value-for-object-%d", k, i)
	}
	spec := map[string]interface{}{
		"replicas": 1 + i%5, "paused": i%11 == 0, "weight": 0.25 + float64(i%4),
		"template": map[string]interface{}{
			"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": fmt.Sprintf("app-%d", i%100)}},
			"spec":     map[string]interface{}{"containers": containers, "serviceAccountName": "bench", "volumes": []interface{}{}},
		},
		"config": config,
	}
	status := map[string]interface{}{
		"observedGeneration": 3, "readyReplicas": 1 + i%5,
		"conditions": []interface{}{
			map[string]interface{}{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "Available", "message": ""},
			map[string]interface{}{"type": "Progressing", "status": "False", "lastTransitionTime": "2026-11-30T10:00:00Z", "reason": "Done", "message": "rollout finished ✓"},
		},
	}
	lastApplied, _ := json.Marshal(map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]interface{}{"replicas": 1 + i%5}})
	obj := map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{
			"name": fmt.Sprintf("obj-%06d", i), "namespace": fmt.Sprintf("bench-%d", i%10),
			"uid": fmt.Sprintf("6f1c2e4a-0b7d-4c1e-9a3f-%012d", i), "resourceVersion": fmt.Sprint(100000 + i),
			"generation": 3, "creationTimestamp": "2026-11-30T09:59:00Z",
			"labels":      map[string]interface{}{"app": fmt.Sprintf("app-%d", i%100), "tier": "front", "env": "prod", "instance": fmt.Sprintf("obj-%06d", i)},
			"annotations": map[string]interface{}{"bench.informerkit.io/owner": fmt.Sprintf("team-%d", i%7), lastAppliedKey: string(lastApplied) + "\n"},
			"finalizers":  []interface{}{"example.com/cleanup"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "apps/v1", "kind": "Deployment", "name": "owner",
				"uid": "0a1b2c3d-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}},
		},
		"spec":   spec,
		"status": status,
	}
	obj["metadata"].(map[string]interface{})["managedFields"] = []interface{}{
		map[string]interface{}{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "example.com/v1",
			"time": "2026-11-30T09:59:00Z", "fieldsType": "FieldsV1", "fieldsV1": fieldsOf(map[string]interface{}{"metadata": map[string]interface{}{"labels": obj["metadata"].(map[string]interface{})["labels"]}, "spec": spec})},
		map[string]interface{}{"manager": "widget-controller", "operation": "Update", "apiVersion": "example.com/v1",
			"time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": fieldsOf(map[string]interface{}{"status": status})},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return data
}

// fieldsOf builds a FieldsV1 set ("f:name": {...}, list entries as
// "k:{...}" or "v:...") over v, as the server's managedFields do.
func fieldsOf(v interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	switch v := v.(type) {
	case map[string]interface{}:
		for k, x := range v {
			out["f:"+k] = fieldsOf(x)
		}
	case []interface{}:
		out["."] = map[string]interface{}{}
		for i, x := range v {
			if m, ok := x.(map[string]interface{}); ok {
				key := fmt.Sprint(i)
				if n, ok := m["name"]; ok {
					key = fmt.Sprintf(`{"name":%q}`, n)
				} else if t, ok := m["type"]; ok {
					key = fmt.Sprintf(`{"type":%q}`, t)
				}
				out["k:"+key] = fieldsOf(x)
			} else {
				out[fmt.Sprintf("v:%q", fmt.Sprint(x))] = map[string]interface{}{}
			}
		}
	}
	return out
}
