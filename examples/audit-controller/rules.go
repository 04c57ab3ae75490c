package main

import (
	"fmt"
	"sort"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Violation is one rule an object breaks.
type Violation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// rule checks one thing about an object.
type rule interface {
	name() string
	// check returns the violation, or ok=true when the object complies.
	check(u *unstructured.Unstructured) (v Violation, ok bool)
}

// ruleSet is the compiled rules, checked in order. Safe for concurrent use
// (CEL programs are).
type ruleSet []rule

// compileRules turns the configuration into rules; a CEL expression that
// does not compile or is not boolean is a usage error.
func compileRules(r Rules) (ruleSet, error) {
	var out ruleSet
	for _, k := range r.RequiredLabels {
		out = append(out, requiredLabel(k))
	}
	for _, k := range r.RequiredAnnotations {
		out = append(out, requiredAnnotation(k))
	}
	if len(r.CEL) == 0 {
		return out, nil
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, spec := range r.CEL {
		if seen[spec.Name] {
			return nil, usagef("rule %q given twice", spec.Name)
		}
		seen[spec.Name] = true
		ast, iss := env.Compile(spec.Expression)
		if iss.Err() != nil {
			return nil, usagef("rule %q: %v", spec.Name, iss.Err())
		}
		if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
			return nil, usagef("rule %q: the expression is %s, want bool", spec.Name, t)
		}
		prg, err := env.Program(ast)
		if err != nil {
			return nil, usagef("rule %q: %v", spec.Name, err)
		}
		msg := spec.Message
		if msg == "" {
			msg = "fails " + spec.Expression
		}
		out = append(out, &celRule{ruleName: spec.Name, prg: prg, message: msg})
	}
	return out, nil
}

// check returns every violation of u, sorted by rule name.
func (rs ruleSet) check(u *unstructured.Unstructured) []Violation {
	var out []Violation
	for _, r := range rs {
		if v, ok := r.check(u); !ok {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out
}

type requiredLabel string

func (k requiredLabel) name() string { return "label:" + string(k) }
func (k requiredLabel) check(u *unstructured.Unstructured) (Violation, bool) {
	if _, ok := u.GetLabels()[string(k)]; ok {
		return Violation{}, true
	}
	return Violation{Rule: k.name(), Message: fmt.Sprintf("missing label %q", string(k))}, false
}

type requiredAnnotation string

func (k requiredAnnotation) name() string { return "annotation:" + string(k) }
func (k requiredAnnotation) check(u *unstructured.Unstructured) (Violation, bool) {
	if _, ok := u.GetAnnotations()[string(k)]; ok {
		return Violation{}, true
	}
	return Violation{Rule: k.name(), Message: fmt.Sprintf("missing annotation %q", string(k))}, false
}

type celRule struct {
	ruleName string
	prg      cel.Program
	message  string
}

func (r *celRule) name() string { return r.ruleName }

// check evaluates the expression on the object. An expression that
// cannot be evaluated on this object (a missing field without has(), a
// type mismatch) counts as a violation saying why.
func (r *celRule) check(u *unstructured.Unstructured) (Violation, bool) {
	out, _, err := r.prg.Eval(map[string]any{"object": u.Object})
	if err != nil {
		return Violation{Rule: r.ruleName, Message: "cannot evaluate: " + err.Error()}, false
	}
	pass, isBool := out.Value().(bool)
	if !isBool {
		return Violation{Rule: r.ruleName, Message: fmt.Sprintf("evaluates to %v, not a bool", out.Value())}, false
	}
	if pass {
		return Violation{}, true
	}
	return Violation{Rule: r.ruleName, Message: r.message}, false
}
