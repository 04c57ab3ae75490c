package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// CRDOption adjusts a CRD built by NewCRD.
type CRDOption func(*apiextensionsv1.CustomResourceDefinition)

// ClusterScoped makes the CRD cluster-scoped (the default is namespaced).
func ClusterScoped() CRDOption {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Scope = apiextensionsv1.ClusterScoped
	}
}

// ShortNames sets the CRD's short names.
func ShortNames(names ...string) CRDOption {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.ShortNames = names }
}

// Categories sets the CRD's categories.
func Categories(cats ...string) CRDOption {
	return func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Categories = cats }
}

// Versions replaces the CRD's versions with the named ones, all served; the
// first is the storage version. Objects are schemaless (fields preserved).
func Versions(names ...string) CRDOption {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions = nil
		for i, n := range names {
			c.Spec.Versions = append(c.Spec.Versions, openVersion(n, i == 0))
		}
	}
}

func openVersion(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	preserve := true
	return apiextensionsv1.CustomResourceDefinitionVersion{
		Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: &preserve,
		}},
	}
}

// NewCRD builds a namespaced CRD served at version v1 with a schema that
// preserves unknown fields: group "stable.example.com", kind "CronTab" and
// plural "crontabs" give crontabs.stable.example.com.
func NewCRD(group, kind, plural string, opts ...CRDOption) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Kind: kind, ListKind: kind + "List",
				Singular: lower(kind),
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{openVersion("v1", true)},
		},
	}
	for _, o := range opts {
		o(crd)
	}
	return crd
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

// GVR returns the GroupVersionResource of the CRD's storage version.
func GVR(crd *apiextensionsv1.CustomResourceDefinition) schema.GroupVersionResource {
	v := crd.Spec.Versions[0].Name
	for _, ver := range crd.Spec.Versions {
		if ver.Storage {
			v = ver.Name
		}
	}
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: v, Resource: crd.Spec.Names.Plural}
}

// InstallCRD creates (or updates) the CRD and waits until it is Established
// and every served version appears in discovery.
func (cp *ControlPlane) InstallCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	c := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	existing, err := c.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
	case err != nil:
		return err
	default:
		crd = crd.DeepCopy()
		crd.ResourceVersion = existing.ResourceVersion
		if _, err := c.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update CRD %s: %w", crd.Name, err)
		}
	}
	return cp.WaitForCRD(ctx, crd)
}

// WaitForCRD waits until the CRD is Established and its served versions are
// in discovery (and its unserved versions are not).
func (cp *ControlPlane) WaitForCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	return WaitForCRDAt(ctx, cp.Config(), crd)
}

// WaitForCRDAt is WaitForCRD against any API server cfg reaches (for
// programs that run the control plane in another process). Discovery is
// read per group-version (/apis/group/version), which apiextensions-apiserver
// serves from the CRDs themselves.
func WaitForCRDAt(ctx context.Context, cfg *rest.Config, crd *apiextensionsv1.CustomResourceDefinition) error {
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c := ext.ApiextensionsV1().CustomResourceDefinitions()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		established := false
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			gv := schema.GroupVersion{Group: got.Spec.Group, Version: v.Name}.String()
			list, err := disc.ServerResourcesForGroupVersion(gv)
			found := false
			if err == nil {
				for _, r := range list.APIResources {
					if r.Name == got.Spec.Names.Plural {
						found = true
					}
				}
			}
			if found != v.Served {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established and served: %w", crd.Name, err)
	}
	return nil
}

// InstallCRDYAML installs every CustomResourceDefinition in a (multi-document)
// YAML or JSON stream and waits for each. Documents of other kinds are an error.
func (cp *ControlPlane) InstallCRDYAML(ctx context.Context, data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return out, err
		}
		if crd.Name == "" {
			continue // empty document
		}
		if crd.Kind != "CustomResourceDefinition" {
			return out, fmt.Errorf("document %q is a %s, not a CustomResourceDefinition", crd.Name, crd.Kind)
		}
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return out, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// finalizerNudgeAfter is how long DeleteCRD lets a deleted CRD wait for the
// server's CRD finalizer before it nudges it (see DeleteCRD).
const finalizerNudgeAfter = 3 * time.Second

// DeleteCRD deletes the CRD and waits until it no longer exists and its
// group-versions no longer list it in discovery.
//
// A CRD deleted right after it was created can wait for minutes: the
// server's CRD finalizer (apiextensions-apiserver, crd_finalizer.go) fails
// to list the instances while the new resource's watch cache is still
// initializing ("storage is (re)initializing"), its retry can read a stale
// copy of the CRD and end on a conflict, and it ignores CRD updates that
// only change the Terminating condition, so nothing requeues the CRD until
// the informer's periodic resync. While the CRD still exists after
// finalizerNudgeAfter, DeleteCRD therefore touches an annotation on it
// (every finalizerNudgeAfter), which the finalizer does requeue on; a
// finalizer that is merely busy only runs its idempotent sync once more.
func (cp *ControlPlane) DeleteCRD(ctx context.Context, name string) error {
	c := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	disc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config())
	lastNudge, nudges := time.Now(), 0
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := c.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err == nil && time.Since(lastNudge) >= finalizerNudgeAfter {
				lastNudge = time.Now()
				nudges++
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.informerkit.io/finalizer-nudge":"%d"}}}`, nudges)
				// A failed nudge (the CRD just went away, a conflict) is
				// retried at the next interval.
				_, _ = c.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			}
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			gv := schema.GroupVersion{Group: got.Spec.Group, Version: v.Name}.String()
			list, err := disc.ServerResourcesForGroupVersion(gv)
			if err != nil {
				continue
			}
			for _, r := range list.APIResources {
				if r.Name == got.Spec.Names.Plural {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not gone: %w", name, err)
	}
	return nil
}

// CreateNamespace creates the namespace (an existing one is fine).
func (cp *ControlPlane) CreateNamespace(ctx context.Context, name string) error {
	_, err := cp.Kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Grant binds rules to user: in namespace (a Role and RoleBinding) or, when
// namespace is empty, cluster-wide (a ClusterRole and ClusterRoleBinding).
// The binding name is derived from user and name.
func (cp *ControlPlane) Grant(ctx context.Context, user, namespace, name string, rules ...rbacv1.PolicyRule) error {
	kube := cp.Kube()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	objName := user + "-" + name
	if namespace == "" {
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: objName}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: objName}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: objName},
		}, metav1.CreateOptions{})
		return err
	}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: objName}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: objName}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: objName},
	}, metav1.CreateOptions{})
	return err
}
