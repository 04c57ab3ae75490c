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
	ep.User = userText(ep.User, cfg.Impersonate.UserName)
	return cfg, ep, nil
}

// userText names the user of messages: the kubeconfig user, and the user
// it impersonates when that is another ("alice as bob"); a user that
// impersonates itself is named once ("bob", not "bob as bob").
func userText(user, impersonated string) string {
	switch {
	case impersonated == "" || impersonated == user:
		return user
	case user == "":
		return "as " + impersonated
	}
	return user + " as " + impersonated
}
