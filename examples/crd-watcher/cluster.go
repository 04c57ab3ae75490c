package main

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig loads the client configuration the way kubectl does:
// --kubeconfig, else $KUBECONFIG (a list of files), else ~/.kube/config,
// else the in-cluster service account; --context picks a context. The
// endpoint names the server, context and user for messages.
func restConfig(c *Config) (*rest.Config, endpoint, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, endpoint{}, err
	}
	ep := endpoint{Host: cfg.Host}
	if raw, err := cc.RawConfig(); err == nil {
		ep.Context = raw.CurrentContext
		if c.Context != "" {
			ep.Context = c.Context
		}
		if kctx := raw.Contexts[ep.Context]; kctx != nil {
			ep.User = kctx.AuthInfo
		}
	}
	if ep.Context == "" {
		ep.User = "in-cluster service account"
	}
	if u := cfg.Impersonate.UserName; u != "" {
		if ep.User != "" {
			ep.User += " as " + u
		} else {
			ep.User = "as " + u
		}
	}
	return cfg, ep, nil
}
