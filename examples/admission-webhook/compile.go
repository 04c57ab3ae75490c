package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Lookup functions, callable from every validation:
//
//	lookup.get(resource, namespace, name)        the cached object, or null
//	lookup.list(resource, namespace, selector)   the cached objects matching a label selector ("" all; namespace "" all namespaces)
//	lookup.count(resource, namespace, selector)  how many lookup.list would return
//
// resource must be a string literal: a kubectl name ("ingresses.networking.k8s.io",
// "gw") for a resource served when the policy loads, or resource.version.group
// ("gadgets.v1.xref.example.com") for one that may be installed later.
const (
	lookupGet   = "get"
	lookupList  = "list"
	lookupCount = "count"
)

var lookupFunctions = []string{lookupGet, lookupList, lookupCount}

// namespacesRef is the cache namespaceObject is read from.
const namespacesRef = "namespaces.v1"

// policy is a loaded, compiled policy. It is immutable once built.
type policy struct {
	sourcePolicy
	// resources are the GVRs the policy matches (Match.Resources resolved).
	resources []schema.GroupVersionResource
	selector  labels.Selector
	// lookups are the resource literals the validations look up, sorted:
	// the caches the policy reads.
	lookups   []string
	condition plugincel.ConditionEvaluator
}

// matches reports whether the policy judges a request on gvr.
func (p *policy) matchesResource(gvr schema.GroupVersionResource) bool {
	return slices.ContainsFunc(p.resources, func(r schema.GroupVersionResource) bool {
		return r.Group == gvr.Group && r.Resource == gvr.Resource
	})
}

// compiler turns policy specs into policies: match resources resolved
// through discovery, validations compiled with k8s.io/apiserver's CEL
// environment for admission (the one ValidatingAdmissionPolicy uses:
// object, oldObject, request, namespaceObject and the Kubernetes
// libraries) extended with the lookup functions.
type compiler struct {
	cel     plugincel.Compiler
	resolve func(ctx context.Context, ref string) (schema.GroupVersionResource, error)
}

// newCELEnvSet is the base admission environment plus the lookup
// functions, which read through caches.
func newCELEnvSet(c *caches) (*environment.EnvSet, error) {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions:        c.celFunctions(),
	})
}

func newCompiler(envSet *environment.EnvSet, resolve func(ctx context.Context, ref string) (schema.GroupVersionResource, error)) *compiler {
	return &compiler{cel: plugincel.NewCompiler(envSet), resolve: resolve}
}

// validationAccessor is a validation expression for the CEL compiler.
type validationAccessor struct{ expr string }

func (v validationAccessor) GetExpression() string    { return v.expr }
func (v validationAccessor) ReturnTypes() []*cel.Type { return []*cel.Type{cel.BoolType} }

// compile builds one policy, or says with its line why it cannot.
func (c *compiler) compile(ctx context.Context, sp sourcePolicy) (*policy, *PolicyError) {
	fail := func(line int, err error) (*policy, *PolicyError) {
		return nil, &PolicyError{File: sp.File, Line: line, Policy: sp.Name, Err: err}
	}
	p := &policy{sourcePolicy: sp}
	for i, ref := range sp.Match.Resources {
		gvr, err := c.resolve(ctx, ref)
		if err != nil {
			return fail(sp.resourceLine(i), fmt.Errorf("match.resources: %w", err))
		}
		p.resources = append(p.resources, gvr)
	}
	p.selector, _ = labels.Parse(sp.Match.LabelSelector) // validated by parse
	lookups := map[string]bool{}
	results := make([]plugincel.CompilationResult, 0, len(sp.Validations))
	for i := range sp.Validations {
		node := &sp.Validations[i].Expression
		refs, err := lookupRefs(node.Value)
		if err != nil {
			var le *lookupError
			if errors.As(err, &le) {
				return fail(expressionLine(node, le.line), fmt.Errorf("validations[%d]: %v", i, le.msg))
			}
			return fail(expressionLine(node, 1), fmt.Errorf("validations[%d]: %w", i, err))
		}
		for _, r := range refs {
			if _, err := c.resolve(ctx, r.ref); err != nil {
				return fail(expressionLine(node, r.line), fmt.Errorf("validations[%d]: lookup of %q: %w", i, r.ref, err))
			}
			lookups[r.ref] = true
		}
		res := c.cel.CompileCELExpression(validationAccessor{node.Value}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions)
		if res.Error != nil {
			line, msg := expressionLine(node, 1), res.Error.Detail
			var ce *apiservercel.CompilationError
			if errors.As(res.Error.Cause, &ce) && ce.Issues != nil && len(ce.Issues.Errors()) > 0 {
				first := ce.Issues.Errors()[0]
				line = expressionLine(node, first.Location.Line())
				msg = "CEL: " + strings.TrimSpace(ce.Issues.String())
			}
			return fail(line, fmt.Errorf("validations[%d]: %s", i, msg))
		}
		results = append(results, res)
	}
	for r := range lookups {
		p.lookups = append(p.lookups, r)
	}
	sort.Strings(p.lookups)
	p.condition = plugincel.NewCondition(results)
	return p, nil
}

// lookupRef is one lookup's resource literal and the expression line it
// is on.
type lookupRef struct {
	ref  string
	line int
}

type lookupError struct {
	line int
	msg  string
}

func (e *lookupError) Error() string { return e.msg }

var parseEnv = func() *cel.Env {
	env, err := cel.NewEnv()
	if err != nil {
		panic(err)
	}
	return env
}()

// lookupRefs finds the lookup.* calls of an expression and returns their
// resource arguments, which must be string literals (the caches are
// chosen when the policy loads, not per request). An expression that
// reads namespaceObject reads the Namespace cache (namespacesRef). Syntax errors are left
// to the compiler, which reports them with the full environment.
func lookupRefs(expr string) ([]lookupRef, error) {
	parsed, iss := parseEnv.Parse(expr)
	if iss.Err() != nil {
		return nil, nil
	}
	info := parsed.NativeRep().SourceInfo()
	var refs []lookupRef
	var bad *lookupError
	ast.PreOrderVisit(ast.NavigateAST(parsed.NativeRep()), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.IdentKind && e.AsIdent() == plugincel.NamespaceVarName {
			refs = append(refs, lookupRef{ref: namespacesRef, line: info.GetStartLocation(e.ID()).Line()})
			return
		}
		if e.Kind() != ast.CallKind || bad != nil {
			return
		}
		call := e.AsCall()
		if !call.IsMemberFunction() || call.Target().Kind() != ast.IdentKind || call.Target().AsIdent() != "lookup" ||
			!slices.Contains(lookupFunctions, call.FunctionName()) {
			return
		}
		line := info.GetStartLocation(e.ID()).Line()
		if len(call.Args()) != 3 {
			bad = &lookupError{line: line, msg: fmt.Sprintf("lookup.%s takes 3 arguments (resource, namespace, %s)", call.FunctionName(), map[bool]string{true: "name", false: "label selector"}[call.FunctionName() == lookupGet])}
			return
		}
		arg := call.Args()[0]
		s, ok := "", false
		if arg.Kind() == ast.LiteralKind {
			s, ok = arg.AsLiteral().Value().(string)
		}
		if !ok || s == "" {
			bad = &lookupError{line: line, msg: fmt.Sprintf("lookup.%s: the resource must be a string literal (the caches are chosen when the policy loads)", call.FunctionName())}
			return
		}
		refs = append(refs, lookupRef{ref: s, line: line})
	}))
	if bad != nil {
		return nil, bad
	}
	return refs, nil
}
