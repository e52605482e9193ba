package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// aclFlags are the flags of `tripod acls` subcommands, kafka-acls' names:
// the resources, the principals and hosts allowed or denied, the
// operations and the pattern type.
type aclFlags struct {
	topics, groups, transactionalIDs []string
	cluster                          bool
	patternType                      string
	allowPrincipals, denyPrincipals  []string
	allowHosts, denyHosts            []string
	operations                       []string
	principal                        string
	producer, consumer, idempotent   bool
}

// addResourceFlags adds the flags naming resources and the pattern type,
// whose default is patternDefault.
func (f *aclFlags) addResourceFlags(cmd *cobra.Command, patternDefault string) {
	fs := cmd.Flags()
	fs.StringSliceVar(&f.topics, "topic", nil, "a topic the ACLs are for (repeatable; * is every topic)")
	fs.StringSliceVar(&f.groups, "group", nil, "a consumer group the ACLs are for (repeatable; * is every group)")
	fs.StringSliceVar(&f.transactionalIDs, "transactional-id", nil, "a transactional id the ACLs are for (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the ACLs are for the cluster")
	fs.StringVar(&f.patternType, "resource-pattern-type", patternDefault, "how resource names match: literal or prefixed (list and remove: also any or match)")
}

// addEntryFlags adds the flags naming principals, hosts and operations.
func (f *aclFlags) addEntryFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&f.allowPrincipals, "allow-principal", nil, "a principal allowed, Type:name such as User:alice or User:* (repeatable)")
	fs.StringSliceVar(&f.denyPrincipals, "deny-principal", nil, "a principal denied, Type:name (repeatable)")
	fs.StringSliceVar(&f.allowHosts, "allow-host", nil, "a host the allowed principals may connect from (repeatable; default *)")
	fs.StringSliceVar(&f.denyHosts, "deny-host", nil, "a host the denied principals are denied from (repeatable; default *)")
	fs.StringSliceVar(&f.operations, "operation", nil, "an operation: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable)")
}

// aclResource is one resource pattern the flags name.
type aclResource struct {
	typ  coord.ACLResourceType
	name string
}

// resources returns the resources the flags name.
func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, t := range f.topics {
		out = append(out, aclResource{coord.ACLResourceTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, aclResource{coord.ACLResourceGroup, g})
	}
	for _, x := range f.transactionalIDs {
		out = append(out, aclResource{coord.ACLResourceTransactionalID, x})
	}
	if f.cluster {
		out = append(out, aclResource{coord.ACLResourceCluster, "kafka-cluster"})
	}
	return out
}

// pattern parses --resource-pattern-type; only literal and prefixed
// unless filter.
func (f *aclFlags) pattern(filter bool) (coord.ACLPatternType, error) {
	p, err := coord.ParseACLPatternType(f.patternType)
	if err != nil || (!filter && p != coord.ACLPatternLiteral && p != coord.ACLPatternPrefixed) {
		want := "literal or prefixed"
		if filter {
			want = "literal, prefixed, any or match"
		}
		return 0, fmt.Errorf("--resource-pattern-type %q: want %s", f.patternType, want)
	}
	return p, nil
}

// parseOperations reads --operation values; none gives whenNone.
func parseOperations(values []string, whenNone coord.ACLOperation) ([]coord.ACLOperation, error) {
	if len(values) == 0 {
		return []coord.ACLOperation{whenNone}, nil
	}
	var out []coord.ACLOperation
	for _, v := range values {
		op, err := coord.ParseACLOperation(strings.TrimSpace(v))
		if err != nil || op == coord.ACLOperationAny {
			return nil, fmt.Errorf("--operation %q: want Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All", v)
		}
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	return out, nil
}

// checkPrincipals checks every value of flag is Type:name.
func checkPrincipals(flag string, principals []string) error {
	for _, p := range principals {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("--%s %q: want Type:name (User:alice, or User:* for everyone)", flag, p)
		}
	}
	return nil
}

// orStar is hosts, or "*" when none is given.
func orStar(hosts []string) []string {
	if len(hosts) == 0 {
		return []string{"*"}
	}
	return hosts
}

// newACLsCmd builds `tripod acls list|add|remove`, a small kafka-acls for
// any Kafka-protocol cluster with an authorizer.
func newACLsCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "acls",
		Short: "List, add and remove ACLs (like kafka-acls)",
		Long: `List, add and remove the ACLs a broker with an authorizer
(authorizer.class.name) checks every request against, with kafka-acls'
flags. Changes take effect on every broker without a restart. Adding and
removing needs ALTER on the cluster, listing DESCRIBE (a super user has
both); use --sasl-* and --tls-ca to authenticate as such a principal.
--bootstrap-server is accepted as another name of --bootstrap.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-acls' name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newACLsListCmd(opts), newACLsAddCmd(opts), newACLsRemoveCmd(opts))
	return cmd
}

// aclRow is an ACL as the commands print it, in kafka-acls' words.
func aclRow(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) []string {
	return []string{strings.ToUpper(rt.String()), strings.ToUpper(pattern.String()), name, principal, host,
		strings.ToUpper(op.String()), strings.ToUpper(perm.String())}
}

// printACLs writes rows under the ACL columns, sorted, each once;
// nothing without rows.
func printACLs(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	slices.SortFunc(rows, slices.Compare[[]string])
	rows = slices.CompactFunc(rows, slices.Equal[[]string])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE-TYPE\tPATTERN-TYPE\tRESOURCE\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// newACLsListCmd builds `tripod acls list`.
func newACLsListCmd(opts *topicsOptions) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "list [--topic T | --group G | --cluster ...] [--principal P]",
		Short: "List ACLs",
		Long: `List the ACLs of the resources named (every ACL without one), of
--principal only when it is given, one row per ACL. With
--resource-pattern-type match, a named resource lists every ACL that
applies to it: its literal ones, the literal *, and the prefixed ones
that cover it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pattern, err := f.pattern(true)
			if err != nil {
				return err
			}
			if f.principal != "" {
				if err := checkPrincipals("principal", []string{f.principal}); err != nil {
					return err
				}
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			var filters []*kmsg.DescribeACLsRequest
			newFilter := func(rt coord.ACLResourceType, name *string) {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourceName = kmsg.ACLResourceType(rt), name
				req.ResourcePatternType = kmsg.ACLResourcePatternType(pattern)
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				if f.principal != "" {
					req.Principal = &f.principal
				}
				filters = append(filters, req)
			}
			resources := f.resources()
			if len(resources) == 0 {
				newFilter(coord.ACLResourceAny, nil)
			}
			for _, r := range resources {
				newFilter(r.typ, &r.name)
			}
			var rows [][]string
			for _, req := range filters {
				resp, err := req.RequestWith(ctx, adm.cl)
				if err != nil {
					return fmt.Errorf("describe ACLs: %w", err)
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return fmt.Errorf("describe ACLs: %w", resultError(err, errorText(resp.ErrorMessage)))
				}
				for _, res := range resp.Resources {
					for _, a := range res.ACLs {
						rows = append(rows, aclRow(res.ResourceType, res.ResourcePatternType, res.ResourceName, a.Principal, a.Host, a.Operation, a.PermissionType))
					}
				}
			}
			printACLs(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	f.addResourceFlags(cmd, "any")
	cmd.Flags().StringVar(&f.principal, "principal", "", "list only this principal's ACLs, Type:name")
	return cmd
}

// newACLsAddCmd builds `tripod acls add`.
func newACLsAddCmd(opts *topicsOptions) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "add (--allow-principal P | --deny-principal P) (--topic T | --group G | --cluster ...) [--operation OP]",
		Short: "Add ACLs",
		Long: `Add an ACL for every combination of the resources named, the allowed
principals with their --allow-host hosts and the denied ones with their
--deny-host hosts (* when none is given), and the operations (All when
none is given). --producer adds what a producer needs on its topics
(Write, Describe, Create; with --idempotent, IdempotentWrite on the
cluster), --consumer what a consumer needs (Read, Describe on the
topics, Read on the groups). Adding an ACL that exists is no error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pattern, err := f.pattern(false)
			if err != nil {
				return err
			}
			if err := errors.Join(checkPrincipals("allow-principal", f.allowPrincipals), checkPrincipals("deny-principal", f.denyPrincipals)); err != nil {
				return err
			}
			if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
				return errors.New("--allow-principal or --deny-principal: name whom the ACLs are for")
			}
			acls, err := f.entries(pattern)
			if err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			req := kmsg.NewPtrCreateACLsRequest()
			for _, a := range acls {
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.ResourceName, kmsg.ACLResourcePatternType(a.PatternType)
				c.Principal, c.Host = a.Principal, a.Host
				c.Operation, c.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
				req.Creations = append(req.Creations, c)
			}
			resp, err := req.RequestWith(ctx, adm.cl)
			if err != nil {
				return fmt.Errorf("create ACLs: %w", err)
			}
			var rows [][]string
			var failed []error
			for i, r := range resp.Results {
				if i >= len(req.Creations) {
					break
				}
				c := req.Creations[i]
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					failed = append(failed, fmt.Errorf("ACL %s: %w", acls[i], resultError(err, errorText(r.ErrorMessage))))
					continue
				}
				rows = append(rows, aclRow(c.ResourceType, c.ResourcePatternType, c.ResourceName, c.Principal, c.Host, c.Operation, c.PermissionType))
			}
			if len(resp.Results) != len(req.Creations) {
				failed = append(failed, fmt.Errorf("create ACLs: %d results for %d ACLs", len(resp.Results), len(req.Creations)))
			}
			if len(rows) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "added:")
				printACLs(cmd.OutOrStdout(), rows)
			}
			return errors.Join(failed...)
		},
	}
	f.addResourceFlags(cmd, "literal")
	f.addEntryFlags(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.producer, "producer", false, "add what a producer needs on the topics (Write, Describe, Create) and transactional ids (Write, Describe)")
	fs.BoolVar(&f.consumer, "consumer", false, "add what a consumer needs on the topics (Read, Describe) and groups (Read)")
	fs.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IdempotentWrite on the cluster too")
	return cmd
}

// entries returns the ACLs add creates for the flags.
func (f *aclFlags) entries(pattern coord.ACLPatternType) ([]coord.ACL, error) {
	type grant struct {
		res aclResource
		ops []coord.ACLOperation
	}
	var grants []grant
	if f.producer || f.consumer {
		if len(f.operations) > 0 || f.cluster {
			return nil, errors.New("--producer and --consumer name their operations: give --topic (and --group or --transactional-id) only")
		}
		if len(f.transactionalIDs) > 0 && !f.producer {
			return nil, errors.New("--transactional-id goes with --producer")
		}
		if len(f.topics) == 0 {
			return nil, errors.New("--producer and --consumer need --topic")
		}
		for _, t := range f.topics {
			res := aclResource{coord.ACLResourceTopic, t}
			if f.producer {
				grants = append(grants, grant{res, []coord.ACLOperation{coord.ACLOperationWrite, coord.ACLOperationDescribe, coord.ACLOperationCreate}})
			}
			if f.consumer {
				grants = append(grants, grant{res, []coord.ACLOperation{coord.ACLOperationRead, coord.ACLOperationDescribe}})
			}
		}
		if f.consumer {
			if len(f.groups) == 0 {
				return nil, errors.New("--consumer needs --group")
			}
			for _, g := range f.groups {
				grants = append(grants, grant{aclResource{coord.ACLResourceGroup, g}, []coord.ACLOperation{coord.ACLOperationRead}})
			}
		}
		for _, id := range f.transactionalIDs {
			// A transactional producer, as kafka-acls --producer
			// --transactional-id grants it.
			grants = append(grants, grant{aclResource{coord.ACLResourceTransactionalID, id}, []coord.ACLOperation{coord.ACLOperationWrite, coord.ACLOperationDescribe}})
		}
		if f.producer && f.idempotent {
			grants = append(grants, grant{aclResource{coord.ACLResourceCluster, "kafka-cluster"}, []coord.ACLOperation{coord.ACLOperationIdempotentWrite}})
		}
	} else {
		resources := f.resources()
		if len(resources) == 0 {
			return nil, errors.New("--topic, --group, --transactional-id or --cluster: name the resources the ACLs are for")
		}
		ops, err := parseOperations(f.operations, coord.ACLOperationAll)
		if err != nil {
			return nil, err
		}
		for _, r := range resources {
			grants = append(grants, grant{r, ops})
		}
	}
	var out []coord.ACL
	for _, g := range grants {
		p := pattern
		if g.res.typ == coord.ACLResourceCluster {
			p = coord.ACLPatternLiteral
		}
		for _, op := range g.ops {
			add := func(principals, hosts []string, perm coord.ACLPermission) {
				for _, principal := range principals {
					for _, host := range orStar(hosts) {
						out = append(out, coord.ACL{ResourceType: g.res.typ, ResourceName: g.res.name, PatternType: p,
							Principal: principal, Host: host, Operation: op, Permission: perm})
					}
				}
			}
			add(f.allowPrincipals, f.allowHosts, coord.ACLPermissionAllow)
			add(f.denyPrincipals, f.denyHosts, coord.ACLPermissionDeny)
		}
	}
	return coord.SortACLs(out), nil
}

// newACLsRemoveCmd builds `tripod acls remove`.
func newACLsRemoveCmd(opts *topicsOptions) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "remove (--topic T | --group G | --cluster ...) [--allow-principal P] [--deny-principal P] [--operation OP]",
		Short: "Remove ACLs",
		Long: `Remove the ACLs of the resources named: without --allow-principal and
--deny-principal every ACL of them; with them, the ACLs of those
principals, from their hosts (any host when none is given), of the
operations given (any operation when none is given). Prints the ACLs
removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pattern, err := f.pattern(true)
			if err != nil {
				return err
			}
			if err := errors.Join(checkPrincipals("allow-principal", f.allowPrincipals), checkPrincipals("deny-principal", f.denyPrincipals)); err != nil {
				return err
			}
			resources := f.resources()
			if len(resources) == 0 {
				return errors.New("--topic, --group, --transactional-id or --cluster: name the resources whose ACLs to remove")
			}
			ops := []coord.ACLOperation{coord.ACLOperationAny}
			if len(f.operations) > 0 {
				if ops, err = parseOperations(f.operations, coord.ACLOperationAny); err != nil {
					return err
				}
			}
			req := kmsg.NewPtrDeleteACLsRequest()
			for _, r := range resources {
				filter := func(principal *string, host *string, op coord.ACLOperation, perm kmsg.ACLPermissionType) {
					fl := kmsg.NewDeleteACLsRequestFilter()
					fl.ResourceType, fl.ResourceName = kmsg.ACLResourceType(r.typ), &r.name
					fl.ResourcePatternType = kmsg.ACLResourcePatternType(pattern)
					if r.typ == coord.ACLResourceCluster && pattern != coord.ACLPatternAny && pattern != coord.ACLPatternMatch {
						fl.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
					}
					fl.Principal, fl.Host, fl.Operation, fl.PermissionType = principal, host, kmsg.ACLOperation(op), perm
					req.Filters = append(req.Filters, fl)
				}
				if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
					for _, op := range ops {
						filter(nil, nil, op, kmsg.ACLPermissionTypeAny)
					}
					continue
				}
				each := func(principals, hosts []string, perm kmsg.ACLPermissionType) {
					for _, p := range principals {
						for _, op := range ops {
							if len(hosts) == 0 {
								filter(&p, nil, op, perm)
							}
							for _, h := range hosts {
								filter(&p, &h, op, perm)
							}
						}
					}
				}
				each(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
				each(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			resp, err := req.RequestWith(ctx, adm.cl)
			if err != nil {
				return fmt.Errorf("delete ACLs: %w", err)
			}
			var rows [][]string
			var failed []error
			for _, r := range resp.Results {
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					failed = append(failed, fmt.Errorf("delete ACLs: %w", resultError(err, errorText(r.ErrorMessage))))
					continue
				}
				for _, m := range r.MatchingACLs {
					rows = append(rows, aclRow(m.ResourceType, m.ResourcePatternType, m.ResourceName, m.Principal, m.Host, m.Operation, m.PermissionType))
				}
			}
			if len(rows) == 0 && len(failed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no ACL matched")
			} else if len(rows) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "removed:")
				printACLs(cmd.OutOrStdout(), rows)
			}
			return errors.Join(failed...)
		},
	}
	f.addResourceFlags(cmd, "literal")
	f.addEntryFlags(cmd)
	return cmd
}

// errorText is a response's error message, or "".
func errorText(msg *string) string {
	if msg == nil {
		return ""
	}
	return *msg
}
