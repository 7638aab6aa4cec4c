"""Policy pack enforcing the stack's security rules in `pulumi preview --policy-pack infra/policy`."""
