/*
Copyright 2018 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from sigs.k8s.io/controller-runtime v0.25.2, pkg/cache/cache_suite_test.go
// (Apache-2.0, header above). informerkit port: envtest is replaced by
// the in-process kube-apiserver and etcd of test/controlplane, started
// once for the package by TestMain (the suite's BeforeSuite takes its
// admin config; AfterSuite has nothing left to stop). The API server is
// the same kind envtest runs (no controllers, no kubelet), at the version
// the test module builds (v1.37.2). BeforeSuite also lengthens gomega's
// default Eventually timeout (see there).
package crsuitetest

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/informerkit/informerkit/test/controlplane"
)

func TestSource(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cache Suite")
}

var cp *controlplane.ControlPlane
var cfg *rest.Config
var clientset *kubernetes.Clientset

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp))
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	// informerkit port: an Eventually without a timeout of its own
	// (a handler receiving the add of a pod just created) waits up to
	// 30 s instead of gomega's 1 s default, as the suite runs beside
	// other packages' tests on a shared machine; the assertions are
	// unchanged, and so are the timeouts the specs set themselves.
	SetDefaultEventuallyTimeout(30 * time.Second)

	cfg = cp.Config()

	var err error
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})
