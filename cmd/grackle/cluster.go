package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) clusterCmd() *cobra.Command {
	cmd := a.group("cluster", "Show the cluster and change its membership")
	cmd.AddCommand(
		a.clusterStatusCmd(),
		a.clusterAddCmd(),
		a.clusterRemoveCmd(),
		a.clusterTransferCmd(),
	)
	return cmd
}

func (a *app) clusterStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the leader, Raft indexes and members, as seen by the node answering",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetClusterStatusResponse, error) {
				return c.cluster.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{ProbeMembers: true})
			})
			if err != nil {
				return err
			}
			return a.show(clusterStatusView(resp))
		},
	}
}

func (a *app) clusterAddCmd() *cobra.Command {
	var (
		raftAddr, grpcAddr string
		voter              bool
	)
	cmd := &cobra.Command{
		Use:   "add NODE_ID --raft-addr HOST:PORT --grpc-addr HOST:PORT",
		Short: "Add a node to the cluster (through the leader)",
		Long: `Add a node to the cluster (through the leader).

A voter joins as a nonvoter and the leader promotes it once it has caught
up, so the command returns at once with the node listed as "nonvoter";
"grackle cluster status" shows it as "voter" once promoted. A node that
never answers is never promoted and costs no quorum. Adding a voter is
refused (FailedPrecondition) when the cluster could not keep a reachable
quorum should the new node never answer: remove unreachable voters first.`,
		Example: "  grackle cluster add n4 --raft-addr 10.0.0.4:7421 --grpc-addr 10.0.0.4:7420",
		Args:    positional("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if raftAddr == "" {
				return usagef("--raft-addr is required")
			}
			if grpcAddr == "" {
				return usagef("--grpc-addr is required")
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.AddMemberResponse, error) {
				return c.cluster.AddMember(ctx, &pb.AddMemberRequest{NodeId: args[0], RaftAddress: raftAddr, GrpcAddress: grpcAddr, Voter: voter})
			})
			if err != nil {
				return err
			}
			return a.show(membersView(resp, resp.GetMembers()))
		},
	}
	cmd.Flags().StringVar(&raftAddr, "raft-addr", "", "the node's advertised Raft address (required)")
	cmd.Flags().StringVar(&grpcAddr, "grpc-addr", "", "the node's advertised gRPC address (required)")
	cmd.Flags().BoolVar(&voter, "voter", true, "add as a voter (--voter=false: a non-voting member)")
	return cmd
}

func (a *app) clusterRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a node from the cluster (through the leader)",
		Long: `Remove a node from the cluster (through the leader).

Removing a voter is refused (FailedPrecondition) when the voters left would
not have a reachable quorum; removing a nonvoter is always allowed.`,
		Args: positional("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RemoveMemberResponse, error) {
				return c.cluster.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: args[0]})
			})
			if err != nil {
				return err
			}
			return a.show(membersView(resp, resp.GetMembers()))
		},
	}
}

func (a *app) clusterTransferCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "transfer [NODE_ID]",
		Short: "Hand leadership to NODE_ID (or to any other voter)",
		Long: `Hand leadership to NODE_ID (or to any other voter).

Leadership moves at most once per 2 s across the cluster: a leader refuses
(FailedPrecondition) within 2 s of its election, naming when the next
transfer is allowed.`,
		Args: optional("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var target string
			if len(args) == 1 {
				target = args[0]
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.TransferLeadershipResponse, error) {
				return c.cluster.TransferLeadership(ctx, &pb.TransferLeadershipRequest{NodeId: target})
			})
			if err != nil {
				return err
			}
			return a.show(view{
				msg:  resp,
				ids:  []string{resp.GetLeaderId()},
				done: fmt.Sprintf("leader is now %s", resp.GetLeaderId()),
			})
		},
	}
}
