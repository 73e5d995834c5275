"""Who may add and remove documents (bot.authz): default deny; workspace admins and owners (users.info)
and the per-workspace allow list may; Slack's silence is a refusal. The real slack-sdk client against
the fake Slack on 127.0.0.1."""

from __future__ import annotations



from bot.authz import Authorizer, allow_list, listed_for, role
from bot.slack import make_client
from retrieval.settings import Settings
from tests.fake_slack import BOT_TOKEN, FakeSlack
from tests.fake_slack import fake  # noqa: F401  (the module's fake Slack: a pytest fixture)


def authorizer(fake: FakeSlack, admins: str = "", **kw) -> Authorizer:
    settings = Settings(slack={"api_url": fake.api_url, "admins": admins})
    client = make_client(settings, BOT_TOKEN)
    return Authorizer(settings, lambda team: client, **kw)


def test_allow_list_is_per_workspace_and_everyone_must_be_asked_for() -> None:
    s = Settings(slack={"admins": "U1, T1:U2 T2:U3;T2:*"})
    assert allow_list(s) == {"": frozenset({"U1"}), "T1": frozenset({"U2"}), "T2": frozenset({"U3", "*"})}
    assert listed_for(s, "T1") == {"U1", "U2"} and listed_for(s, "T9") == {"U1"}
    assert listed_for(Settings(), "T1") == frozenset()


def test_roles_from_users_info() -> None:
    assert role({"is_admin": True}) == "workspace admin"
    assert role({"is_owner": True}) == "workspace owner"
    assert role({"is_primary_owner": True, "is_owner": True, "is_admin": True}) == "workspace primary owner"
    assert role({}) is None and role({"is_admin": False}) is None
    assert role({"is_admin": True, "deleted": True}) is None
    assert role({"is_admin": True, "is_bot": True}) is None


def test_default_deny_admins_and_owners_allowed_members_refused(fake: FakeSlack) -> None:
    authz = authorizer(fake)
    member = authz.check(fake.team_id, "U0MEMBER")
    assert not member.allowed
    assert "only this workspace's admins and owners can add or remove documents" in member.why
    assert "you can still ask me anything" in member.why
    assert authz.check(fake.team_id, "U0WSADMIN").allowed
    owner = authz.check(fake.team_id, "U0OWNER")
    assert owner.allowed and owner.why == "workspace primary owner"


def test_allow_list_lets_listed_people_in_only_where_listed(fake: FakeSlack) -> None:
    authz = authorizer(fake, admins=f"U0LISTED {fake.team_id}:U0LOCAL T0OTHER:U0ELSEWHERE")
    assert authz.check(fake.team_id, "U0LISTED").allowed
    assert authz.check(fake.team_id, "U0LOCAL").allowed
    refused = authz.check(fake.team_id, "U0ELSEWHERE")  # listed for another workspace only
    assert not refused.allowed and "<@U0LISTED>" in refused.why and "<@U0LOCAL>" in refused.why
    assert "U0ELSEWHERE" not in refused.why
    assert authz.check("T0OTHER", "U0ELSEWHERE").allowed
    assert authorizer(fake, admins="*").check(fake.team_id, "U0ANYONE").allowed


def test_slack_failure_refuses_with_a_reason_and_is_not_cached(fake: FakeSlack) -> None:
    authz = authorizer(fake)
    fake.fail("users.info", "missing_scope")
    refused = authz.check(fake.team_id, "U0WSADMIN")
    assert not refused.allowed and "couldn't check" in refused.why and "missing_scope" in refused.why
    assert authz.check(fake.team_id, "U0WSADMIN").allowed  # asked again, not remembered as a refusal


def test_roles_are_cached_for_a_while(fake: FakeSlack) -> None:
    now = [0.0]
    authz = authorizer(fake, cache_s=60, clock=lambda: now[0])
    user = "U0CACHED"
    before = len([c for c in fake.calls_to("users.info") if c.params.get("user") == user])
    assert not authz.check(fake.team_id, user).allowed
    fake.set_user(user, is_admin=True)  # promoted
    assert not authz.check(fake.team_id, user).allowed  # still the cached answer
    now[0] = 61.0
    assert authz.check(fake.team_id, user).allowed
    assert len([c for c in fake.calls_to("users.info") if c.params.get("user") == user]) - before == 2
