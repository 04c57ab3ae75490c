// Package crsuitetest runs controller-runtime v0.25.2's own pkg/cache
// test suite (its Ginkgo specs and its Go tests, ported file by file;
// each file says where it came from) against informerkit's
// controllerruntime.NewCache, on a kube-apiserver and etcd started in
// this test process. With INFORMERKIT_CRSUITE_CACHE=controller-runtime the
// same specs run against controller-runtime's own cache.New: the control,
// which shows that a spec failing on NewCache fails because of NewCache,
// not because of the port or the control plane.
//
// Not ported: the suite's tests of controller-runtime's unexported
// machinery, which have no counterpart in another implementation
// (defaulting_test.go: defaultOpts, multiNamespaceCache and
// delegatingByGVKCache start; informer_cache_unit_test.go:
// informerCache.objectTypeForListObject). controllerruntime's own
// tests cover its defaulting (TestOptionsFold,
// TestNamespaceAllBesideNamedNamespaces).
//
// Run it with a timeout above go test's default 10 minutes on a shared
// machine (the specs take 1.5–3 minutes under -race on 2 cores, besides
// the build):
//
//	go test -race -timeout 30m ./crsuitetest/
//	INFORMERKIT_CRSUITE_CACHE=controller-runtime go test -race -timeout 30m ./crsuitetest/
package crsuitetest

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/informerkit/informerkit/controllerruntime"
)

// cacheUnderTestEnv selects the cache under test: unset or "informerkit"
// for controllerruntime.NewCache, "controller-runtime" for cache.New.
const cacheUnderTestEnv = "INFORMERKIT_CRSUITE_CACHE"

// newCache is the cache under test, in place of the original suite's
// cache.New.
func newCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	return cacheUnderTest(config, opts)
}

var cacheUnderTest = func() cache.NewCacheFunc {
	switch v := os.Getenv(cacheUnderTestEnv); v {
	case "", "informerkit":
		return controllerruntime.NewCache
	case "controller-runtime":
		return cache.New
	default:
		panic(fmt.Sprintf("%s=%q: want informerkit or controller-runtime", cacheUnderTestEnv, v))
	}
}()
