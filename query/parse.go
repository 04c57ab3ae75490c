package query

import (
	"net/url"
	"strconv"
	"strings"
)

// The string form of a query is a URL query string, for HTTP endpoints
// and command lines:
//
//	namespace=prod&namespace=staging        (or namespace=prod,staging)
//	labelSelector=app%3Dweb                 (Kubernetes label selector syntax)
//	where=spec.replicas>2                   (repeatable; all must hold)
//	where=status.phase in (Running,Pending)
//	where=metadata.name prefix web-
//	where=spec.tags contains blue
//	where=metadata.deletionTimestamp exists
//	orderBy=-metadata.creationTimestamp,metadata.name   (- for descending)
//	limit=50&continue=<token>&count=true
//
// A predicate is a field path (ParsePath), an operator (= == != < > <= >=
// or the words in notin exists prefix contains) and its literal: nothing
// for exists, a parenthesised comma-separated list for in and notin, one
// literal otherwise. Literals are typed as Value says: 'quoted' or
// "quoted" is a string (a doubled quote inside stands for one: 'it''s'), true and false are booleans, numbers are numbers,
// RFC 3339 timestamps are timestamps, and any other text is a string.

// Parse reads a query from its string form (see above). Unknown
// parameters are an error: a caller with parameters of its own removes
// them first and uses ParseValues.
func Parse(s string) (Query, error) {
	v, err := url.ParseQuery(s)
	if err != nil {
		return Query{}, newError(ErrInvalidValue, "", s, "not a URL query string")
	}
	return ParseValues(v)
}

// ParseValues reads a query from URL query parameters (see Parse).
func ParseValues(v url.Values) (Query, error) {
	var q Query
	for name, vals := range v {
		switch name {
		case "namespace", "labelSelector", "where", "orderBy", "limit", "continue", "count":
		default:
			return Query{}, newError(ErrInvalidValue, name, "", "unknown parameter")
		}
		if name != "namespace" && name != "where" && name != "orderBy" && len(vals) > 1 {
			return Query{}, newError(ErrInvalidValue, name, "", "given more than once")
		}
	}
	for _, s := range v["namespace"] {
		for _, ns := range strings.Split(s, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				q.Namespaces = append(q.Namespaces, ns)
			}
		}
	}
	q.LabelSelector = v.Get("labelSelector")
	for _, s := range v["where"] {
		pr, err := ParsePredicate(s)
		if err != nil {
			return Query{}, err
		}
		q.Predicates = append(q.Predicates, pr)
	}
	for _, s := range v["orderBy"] {
		for _, item := range splitList(s) {
			item = strings.TrimSpace(item)
			o := Order{Path: item}
			if strings.HasPrefix(item, "-") {
				o = Order{Path: item[1:], Descending: true}
			} else if strings.HasPrefix(item, "+") {
				o.Path = item[1:]
			}
			if _, err := ParsePath(o.Path); err != nil {
				err.(*Error).Param = "orderBy"
				return Query{}, err
			}
			q.OrderBy = append(q.OrderBy, o)
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return Query{}, newError(ErrInvalidValue, "limit", s, "not a count")
		}
		q.Limit = n
	}
	q.Continue = v.Get("continue")
	if s := v.Get("count"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Query{}, newError(ErrInvalidValue, "count", s, "not true or false")
		}
		q.Count = b
	}
	if _, err := compile(q); err != nil {
		return Query{}, err
	}
	return q, nil
}

// symbolic operators, longest first so that "<=" is not read as "<".
var symbolic = []struct {
	text string
	op   Operator
}{{"!=", Ne}, {"<=", Le}, {">=", Ge}, {"==", Eq}, {"=", Eq}, {"<", Lt}, {">", Gt}}

// ParsePredicate reads one predicate of the string form ("spec.replicas>2",
// "status.phase in (Running,Pending)", "spec.x exists").
func ParsePredicate(s string) (Predicate, error) {
	bad := func(kind error, detail string) (Predicate, error) {
		return Predicate{}, newError(kind, "where", s, detail)
	}
	// The path ends at the first space or operator character outside
	// brackets.
	end, depth := 0, 0
	var quote byte
scan:
	for ; end < len(s); end++ {
		c := s[end]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '[':
			depth++
		case c == ']':
			depth--
		case depth > 0 && (c == '\'' || c == '"'):
			quote = c
		case depth == 0 && strings.IndexByte(" \t=!<>", c) >= 0:
			break scan
		}
	}
	pathText := s[:end]
	if _, err := ParsePath(pathText); err != nil {
		err.(*Error).Param = "where"
		return Predicate{}, err
	}
	rest := strings.TrimLeft(s[end:], " \t")
	pr := Predicate{Path: pathText}
	for _, sym := range symbolic {
		if strings.HasPrefix(rest, sym.text) {
			pr.Op = sym.op
			pr.Values = []Value{parseLiteral(strings.TrimSpace(rest[len(sym.text):]))}
			return pr, nil
		}
	}
	w := 0
	for w < len(rest) && rest[w] != ' ' && rest[w] != '\t' && rest[w] != '(' {
		w++
	}
	word, arg := rest[:w], strings.TrimSpace(rest[w:])
	switch op := Operator(word); op {
	case Exists:
		if arg != "" {
			return bad(ErrInvalidValue, "exists takes no value")
		}
		pr.Op = op
	case Prefix, Contains:
		if w == len(rest) || (rest[w] != ' ' && rest[w] != '\t') {
			return bad(ErrInvalidValue, word+" takes a value after a space")
		}
		pr.Op, pr.Values = op, []Value{parseLiteral(arg)}
	case In, NotIn:
		if len(arg) < 2 || arg[0] != '(' || arg[len(arg)-1] != ')' {
			return bad(ErrInvalidValue, word+" takes a list in parentheses")
		}
		for _, item := range splitList(arg[1 : len(arg)-1]) {
			pr.Values = append(pr.Values, parseLiteral(strings.TrimSpace(item)))
		}
		if len(pr.Values) == 0 || (len(pr.Values) == 1 && pr.Values[0].text == "" && strings.TrimSpace(arg[1:len(arg)-1]) == "") {
			return bad(ErrInvalidValue, word+" takes at least one value")
		}
		pr.Op = op
	case "":
		return bad(ErrUnknownOperator, "no operator")
	default:
		return bad(ErrUnknownOperator, "unknown operator "+strconv.Quote(word))
	}
	return pr, nil
}

// splitList splits at commas outside quotes and brackets.
func splitList(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// Values returns the query's string form as URL parameters (Parse reads
// it back to an equal query, up to the spelling of paths and literals).
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, ns := range q.Namespaces {
		v.Add("namespace", ns)
	}
	if q.LabelSelector != "" {
		v.Set("labelSelector", q.LabelSelector)
	}
	for _, pr := range q.Predicates {
		v.Add("where", pr.String())
	}
	if len(q.OrderBy) > 0 {
		items := make([]string, len(q.OrderBy))
		for i, o := range q.OrderBy {
			items[i] = o.Path
			if o.Descending {
				items[i] = "-" + o.Path
			}
		}
		v.Set("orderBy", strings.Join(items, ","))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Continue != "" {
		v.Set("continue", q.Continue)
	}
	if q.Count {
		v.Set("count", "true")
	}
	return v
}

// String returns the query's string form (Values, encoded).
func (q Query) String() string { return q.Values().Encode() }

// String returns the predicate's string form.
func (pr Predicate) String() string {
	path := pr.Path
	if p, err := ParsePath(pr.Path); err == nil {
		path = p.text
	}
	switch pr.Op {
	case Exists:
		return path + " exists"
	case In, NotIn:
		items := make([]string, len(pr.Values))
		for i, v := range pr.Values {
			items[i] = literalText(v)
		}
		return path + " " + string(pr.Op) + " (" + strings.Join(items, ",") + ")"
	case Prefix, Contains:
		lit := ""
		if len(pr.Values) > 0 {
			lit = literalText(pr.Values[0])
		}
		return path + " " + string(pr.Op) + " " + lit
	}
	lit := ""
	if len(pr.Values) > 0 {
		lit = literalText(pr.Values[0])
	}
	return path + string(pr.Op) + lit
}
