package fleet

import (
	"errors"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func kubeconfigWith(servers map[string]string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	for name, server := range servers {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t-" + name}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	return kc
}

// A context read again unchanged keeps its Config (no rebuild); a changed
// one gets a new Config; a missing named context is ErrClusterConfig.
func TestKubeconfigClustersKeepUnchangedConfigs(t *testing.T) {
	first, known := kubeconfigClusters(kubeconfigWith(map[string]string{"a": "https://a:1", "b": "https://b:1"}), nil, nil)
	if len(first) != 2 || first[0].Name != "a" || first[1].Name != "b" || first[0].Config.Host != "https://a:1" {
		t.Fatalf("first read: %+v", first)
	}
	second, _ := kubeconfigClusters(kubeconfigWith(map[string]string{"a": "https://a:1", "b": "https://b:2"}), nil, known)
	if second[0].Config != first[0].Config {
		t.Error("unchanged context a got a new Config")
	}
	if second[1].Config == first[1].Config || second[1].Config.Host != "https://b:2" {
		t.Errorf("changed context b: %+v", second[1].Config)
	}
	named, _ := kubeconfigClusters(kubeconfigWith(map[string]string{"a": "https://a:1"}), []string{"a", "x"}, nil)
	if len(named) != 2 || named[0].Err != nil || !errors.Is(named[1].Err, ErrClusterConfig) || named[1].Config != nil {
		t.Errorf("named contexts a, x: %+v", named)
	}
}
