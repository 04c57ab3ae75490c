package main

import (
	"context"
	"fmt"
	"net/url"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// webhookTarget says where the API server reaches the webhook: a URL
// (https://host:port, outside the cluster or on loopback) or a Service
// (namespace/name, port 443, inside the cluster).
type webhookTarget struct {
	URL              string
	ServiceNamespace string
	ServiceName      string
	CABundle         []byte
	// TimeoutSeconds is each webhook's timeout (default 5, at most 30).
	TimeoutSeconds int32
	// ConfigName names the ValidatingWebhookConfiguration (default
	// informerkit-admission-webhook).
	ConfigName string
}

// webhookConfigName is the default name of the ValidatingWebhookConfiguration --install writes.
const webhookConfigName = "informerkit-admission-webhook"

// webhookConfiguration builds the ValidatingWebhookConfiguration for the
// loaded policies: one webhook per policy, named <policy>.admission-webhook.informerkit.io,
// at /validate/<policy>, with the policy's resources, operations,
// namespaces (a namespaceSelector on kubernetes.io/metadata.name), label
// selector (an objectSelector) and failure policy.
func webhookConfiguration(set *policySet, t webhookTarget) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	name := t.ConfigName
	if name == "" {
		name = webhookConfigName
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "informerkit-admission-webhook"},
	}}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	timeout := t.TimeoutSeconds
	if timeout == 0 {
		timeout = 5
	}
	for _, name := range set.names() {
		p := set.byName[name]
		cc := admissionregistrationv1.WebhookClientConfig{CABundle: t.CABundle}
		path := validatePathPrefix + p.Name
		switch {
		case t.ServiceName != "":
			port := int32(443)
			cc.Service = &admissionregistrationv1.ServiceReference{Namespace: t.ServiceNamespace, Name: t.ServiceName, Path: &path, Port: &port}
		default:
			u, err := url.Parse(t.URL)
			if err != nil {
				return nil, fmt.Errorf("webhook URL: %w", err)
			}
			u.Path = path
			s := u.String()
			cc.URL = &s
		}
		fp := admissionregistrationv1.Fail
		if p.FailurePolicy == failurePolicyIgnore {
			fp = admissionregistrationv1.Ignore
		}
		var ops []admissionregistrationv1.OperationType
		for _, op := range p.Match.Operations {
			ops = append(ops, admissionregistrationv1.OperationType(op))
		}
		var rules []admissionregistrationv1.RuleWithOperations
		for _, gvr := range p.resources {
			rules = append(rules, admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{gvr.Group}, APIVersions: []string{gvr.Version}, Resources: []string{gvr.Resource},
			}})
		}
		wh := admissionregistrationv1.ValidatingWebhook{
			Name: p.Name + ".admission-webhook.informerkit.io", ClientConfig: cc, Rules: rules,
			FailurePolicy: &fp, MatchPolicy: &equivalent, SideEffects: &sideEffects, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}
		if len(p.Match.Namespaces) > 0 {
			wh.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: p.Match.Namespaces,
			}}}
		}
		if p.Match.LabelSelector != "" {
			sel, err := metav1.ParseToLabelSelector(p.Match.LabelSelector)
			if err != nil {
				return nil, err
			}
			wh.ObjectSelector = sel
		}
		cfg.Webhooks = append(cfg.Webhooks, wh)
	}
	return cfg, nil
}

// installWebhookConfiguration creates or replaces the configuration.
func installWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	api := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cur, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, cfg, metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	}
	cfg.ResourceVersion = cur.ResourceVersion
	_, err = api.Update(ctx, cfg, metav1.UpdateOptions{})
	return err
}
