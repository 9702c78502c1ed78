#!/usr/bin/env python3
"""Build the agentsearch demo tool catalog.

Writes ``catalog.jsonl`` next to this script: one tool definition per line
with the keys name, integration, category, sideEffect, description and
parameters (a JSON Schema object).

Every description and schema in this file was written for the agentsearch
project from general knowledge of what each product's public API can do.
No vendor specification text or third-party dataset was copied.

Standard library only; the output is fully deterministic (no randomness).

Usage:
    python3 build_catalog.py            # writes ./catalog.jsonl
    python3 build_catalog.py --out X    # writes somewhere else
"""

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict

CATEGORIES = (
    "messaging", "email", "crm", "ticketing", "project_management",
    "code_hosting", "storage", "calendar", "meetings", "payments",
    "accounting", "ecommerce", "docs", "spreadsheets", "sms", "marketing",
    "esignature", "hr",
)
SIDE_EFFECTS = ("read", "write", "delete", "send", "unknown")
NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
SLUG_RE = re.compile(r"^[a-z][a-z0-9_]*$")

# ---------------------------------------------------------------------------
# JSON Schema helpers. Each returns a fresh dict; every property carries a
# human-readable "description".
# ---------------------------------------------------------------------------


def _p(type_, desc, extra):
    out = {"type": type_, "description": desc}
    out.update(extra)
    return out


def S(desc, **kw):
    """string"""
    return _p("string", desc, kw)


def I(desc, **kw):
    """integer"""
    return _p("integer", desc, kw)


def N(desc, **kw):
    """number"""
    return _p("number", desc, kw)


def B(desc, **kw):
    """boolean"""
    return _p("boolean", desc, kw)


def E(values, desc, **kw):
    """enum of strings or integers"""
    values = list(values)
    type_ = "integer" if all(isinstance(v, int) for v in values) else "string"
    out = {"type": type_, "enum": values, "description": desc}
    out.update(kw)
    return out


def A(items, desc, **kw):
    """array"""
    out = {"type": "array", "items": items, "description": desc}
    out.update(kw)
    return out


def O(props, desc, req=(), closed=True, **kw):
    """nested object with known properties"""
    out = {"type": "object", "description": desc, "properties": props}
    if req:
        out["required"] = list(req)
    out["additionalProperties"] = not closed
    out.update(kw)
    return out


def MAP(desc, values=True):
    """free-form object (map); values may be a type name or a schema"""
    if isinstance(values, str):
        values = {"type": values}
    return {"type": "object", "description": desc, "additionalProperties": values}


def V(desc, **kw):
    """scalar value of any simple type"""
    return _p(["string", "number", "boolean"], desc, kw)


def EMAIL(desc, **kw):
    return S(desc, format="email", **kw)


def EMAILS(desc, **kw):
    return A({"type": "string", "format": "email"}, desc, **kw)


def STRS(desc, **kw):
    return A({"type": "string"}, desc, **kw)


def INTS(desc, **kw):
    return A({"type": "integer"}, desc, **kw)


def DT(desc, **kw):
    return S(desc, format="date-time", **kw)


def DATE(desc, **kw):
    return S(desc, format="date", **kw)


def URI(desc, **kw):
    return S(desc, format="uri", **kw)


def LIM(default=50, maximum=100, desc="Maximum number of results to return.", minimum=1):
    return I(desc, default=default, minimum=minimum, maximum=maximum)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

TOOLS = []
BUILDERS = []


class Integration:
    """Collects the tools of one integration. Call it to register a tool."""

    def __init__(self, slug, category):
        self.slug = slug
        self.category = category
        self.prefix = slug.upper() + "_"

    def __call__(self, suffix, side, description, props=None, required=(), category=None):
        TOOLS.append({
            "name": self.prefix + suffix,
            "integration": self.slug,
            "category": category or self.category,
            "sideEffect": side,
            "description": " ".join(description.split()),
            "parameters": {
                "type": "object",
                "properties": props or {},
                "required": list(required),
                "additionalProperties": False,
            },
        })


def integration(slug, category):
    def deco(fn):
        BUILDERS.append((slug, category, fn))
        return fn
    return deco


# ===========================================================================
# Messaging
# ===========================================================================

@integration("slack", "messaging")
def _slack(t):
    ch = lambda d="Channel ID such as C024BE91L (preferred) or a name like #general.": S(d)
    ts = lambda d: S(d, pattern=r"^\d+\.\d+$")
    blocks = A(
        O({
            "type": E(["section", "header", "divider", "context", "actions", "image", "rich_text", "input"],
                      "Block Kit block type."),
            "text": O({
                "type": E(["mrkdwn", "plain_text"], "Text object type."),
                "text": S("The text itself."),
            }, "Text object used by section and header blocks.", req=["type", "text"]),
            "block_id": S("Optional stable identifier for the block (max 255 chars)."),
        }, "A Block Kit layout block. Other block fields (accessory, elements, fields...) are passed through.",
            req=["type"], closed=False),
        "Block Kit layout blocks for rich formatting; `text` is still used for notifications.",
        maxItems=50)

    t("POST_MESSAGE", "send",
      "Posts a message to a Slack channel (public or private) as the connected bot. "
      "Send plain `text` with mrkdwn, rich Block Kit `blocks`, or both, and set `thread_ts` "
      "to reply inside an existing thread instead of the main channel.",
      {
          "channel": ch("Channel to post to: a channel ID like C024BE91L or a name like #general. "
                        "The bot must be a member of private channels."),
          "text": S("Message text. Supports mrkdwn (*bold*, _italic_, <@U123> mentions, <https://x.io|links>). "
                    "Doubles as the notification fallback when blocks are supplied.", maxLength=40000),
          "blocks": blocks,
          "thread_ts": ts("Timestamp of the parent message to reply in its thread, e.g. '1712345678.123456'."),
          "reply_broadcast": B("When replying in a thread, also show the reply in the channel.", default=False),
          "unfurl_links": B("Show previews for links to text-based content.", default=True),
          "unfurl_media": B("Show previews for image and video links.", default=True),
          "mrkdwn": B("Interpret mrkdwn formatting in `text`.", default=True),
          "username": S("Custom bot display name for this message (needs chat:write.customize)."),
          "icon_emoji": S("Emoji to use as the bot avatar for this message, e.g. ':rocket:' (needs chat:write.customize)."),
      }, ["channel", "text"])

    t("SEND_DIRECT_MESSAGE", "send",
      "Sends a private direct message (DM) to one Slack user, opening the IM conversation first if needed. "
      "Use it when the recipient is a person rather than a channel.",
      {
          "user": S("Recipient user ID (U0123ABCD) or the email address on their Slack profile."),
          "text": S("Message text; mrkdwn is supported.", maxLength=40000),
          "blocks": A(MAP("A Block Kit block object."), "Optional Block Kit blocks.", maxItems=50),
          "unfurl_links": B("Show link previews.", default=True),
      }, ["user", "text"])

    t("SEND_EPHEMERAL_MESSAGE", "send",
      "Shows a temporary message to a single user inside a channel. Only that user sees it and it "
      "disappears on reload, which suits bot hints and confirmations.",
      {
          "channel": ch(),
          "user": S("ID of the user who should see the ephemeral message; they must be in the channel."),
          "text": S("Message text."),
          "thread_ts": ts("Show the message inside this thread."),
      }, ["channel", "user", "text"])

    t("SCHEDULE_MESSAGE", "send",
      "Queues a message to be posted to a channel at a future time, up to 120 days ahead. "
      "Returns a scheduled_message_id you can use to cancel it before it goes out.",
      {
          "channel": ch(),
          "text": S("Message text."),
          "post_at": I("Unix timestamp (seconds) at which Slack should post the message.", minimum=0),
          "thread_ts": ts("Post as a reply in this thread."),
          "reply_broadcast": B("Also show a threaded reply in the channel.", default=False),
      }, ["channel", "text", "post_at"])

    t("LIST_SCHEDULED_MESSAGES", "read",
      "Returns messages that have been scheduled but not yet sent, optionally for one channel or a time window.",
      {
          "channel": ch("Only list scheduled messages for this channel ID."),
          "oldest": S("Only include messages scheduled after this Unix timestamp."),
          "latest": S("Only include messages scheduled before this Unix timestamp."),
          "limit": LIM(100, 1000),
          "cursor": S("Pagination cursor from a previous response's next_cursor."),
      })

    t("DELETE_SCHEDULED_MESSAGE", "delete",
      "Cancels a pending scheduled message so it is never posted.",
      {
          "channel": ch(),
          "scheduled_message_id": S("ID returned by SLACK_SCHEDULE_MESSAGE, e.g. Q1298393284."),
      }, ["channel", "scheduled_message_id"])

    t("UPDATE_MESSAGE", "write",
      "Edits the text or blocks of a message the app already posted, identified by channel and `ts`. "
      "Only messages authored by the calling bot or user can be changed.",
      {
          "channel": ch(),
          "ts": ts("Timestamp of the message to edit."),
          "text": S("Replacement text."),
          "blocks": A(MAP("A Block Kit block object."), "Replacement blocks; pass [] to remove existing blocks."),
      }, ["channel", "ts"])

    t("DELETE_MESSAGE", "delete",
      "Removes a message from a channel or thread by its timestamp. Bots may only delete their own "
      "messages unless an admin user token is used.",
      {"channel": ch(), "ts": ts("Timestamp of the message to delete.")}, ["channel", "ts"])

    t("GET_CONVERSATION_HISTORY", "read",
      "Fetches recent messages from a channel, DM or group DM, newest first. Narrow the window with "
      "`oldest`/`latest` and page with the cursor; thread replies are not included.",
      {
          "channel": ch(),
          "oldest": S("Only messages after this Unix timestamp, e.g. '1712000000.000000'."),
          "latest": S("Only messages before this Unix timestamp."),
          "inclusive": B("Include messages exactly at oldest/latest.", default=False),
          "limit": LIM(100, 999),
          "cursor": S("Pagination cursor."),
      }, ["channel"])

    t("GET_THREAD_REPLIES", "read",
      "Reads a whole thread: the parent message plus every reply, given the channel and the parent's thread_ts.",
      {
          "channel": ch(),
          "thread_ts": ts("Timestamp of the thread's parent message."),
          "limit": LIM(200, 1000),
          "cursor": S("Pagination cursor."),
      }, ["channel", "thread_ts"])

    t("SEARCH_MESSAGES", "read",
      "Searches messages across the workspace with Slack search syntax, including modifiers like "
      "in:#channel, from:@user, has:link or before:2024-05-01. Requires a user token with search:read.",
      {
          "query": S("Search query, e.g. 'deploy failed in:#ops after:2024-04-01'."),
          "sort": E(["score", "timestamp"], "Sort by relevance or time.", default="score"),
          "sort_dir": E(["asc", "desc"], "Sort direction.", default="desc"),
          "count": LIM(20, 100, "Results per page."),
          "page": I("Page number.", default=1, minimum=1, maximum=100),
          "highlight": B("Wrap matching terms in highlight markers.", default=False),
      }, ["query"])

    t("LIST_CHANNELS", "read",
      "Lists conversations the token can see in the workspace: public channels by default, and private "
      "channels, group DMs or DMs when requested through `types`.",
      {
          "types": A(E(["public_channel", "private_channel", "mpim", "im"], "Conversation type."),
                     "Conversation types to include.", default=["public_channel"]),
          "exclude_archived": B("Leave archived channels out.", default=True),
          "limit": LIM(100, 1000),
          "cursor": S("Pagination cursor."),
          "team_id": S("Workspace ID, only needed for org-wide apps on Enterprise Grid."),
      })

    t("GET_CHANNEL_INFO", "read",
      "Looks up a channel's metadata: name, topic, purpose, creator, whether it is private or archived, "
      "and optionally its member count.",
      {"channel": ch(), "include_num_members": B("Include the member count.", default=False)}, ["channel"])

    t("CREATE_CHANNEL", "write",
      "Creates a new public or private channel. Names must be lowercase without spaces or periods, "
      "at most 80 characters.",
      {
          "name": S("Channel name, e.g. 'proj-apollo'.", pattern=r"^[a-z0-9][a-z0-9_-]{0,79}$"),
          "is_private": B("Create a private channel.", default=False),
          "team_id": S("Workspace ID; required only for org-wide apps on Enterprise Grid."),
      }, ["name"])

    t("ARCHIVE_CHANNEL", "delete",
      "Archives a channel: it becomes read-only and drops out of the channel list, though its history "
      "stays searchable.",
      {"channel": ch()}, ["channel"])

    t("RENAME_CHANNEL", "write",
      "Renames a channel; only channel creators, workspace admins or owners can do this.",
      {"channel": ch(), "name": S("New channel name.", pattern=r"^[a-z0-9][a-z0-9_-]{0,79}$")},
      ["channel", "name"])

    t("INVITE_TO_CHANNEL", "write",
      "Adds workspace members to a channel by user ID, up to 1000 at a time.",
      {
          "channel": ch(),
          "users": STRS("User IDs to add, e.g. ['U0123ABCD'].", minItems=1, maxItems=1000),
      }, ["channel", "users"])

    t("SET_CHANNEL_TOPIC", "write",
      "Changes the topic shown in a channel's header. Slack also drops a small system message into the channel.",
      {"channel": ch(), "topic": S("New topic text.", maxLength=250)}, ["channel", "topic"])

    t("ADD_REACTION", "write",
      "Adds an emoji reaction to a message, e.g. :white_check_mark: to acknowledge a request.",
      {
          "channel": ch(),
          "timestamp": ts("Timestamp of the message to react to."),
          "name": S("Emoji name without colons, e.g. 'eyes' or 'thumbsup::skin-tone-2'."),
      }, ["channel", "timestamp", "name"])

    t("PIN_MESSAGE", "write",
      "Pins a message so it shows up in the channel's pinned items.",
      {"channel": ch(), "timestamp": ts("Timestamp of the message to pin.")}, ["channel", "timestamp"])

    t("UPLOAD_FILE", "send",
      "Uploads a file and shares it into a channel, optionally inside a thread and with an introductory "
      "comment. Provide text content directly, or base64 for binary files.",
      {
          "channel_id": S("ID of the channel to share the file into."),
          "filename": S("File name including extension, e.g. 'report.csv'."),
          "content": S("File content as UTF-8 text."),
          "content_base64": S("File content, base64 encoded, for binary files.", contentEncoding="base64"),
          "title": S("Title shown above the file."),
          "initial_comment": S("Message text posted together with the file."),
          "thread_ts": ts("Share the file as a reply in this thread."),
      }, ["channel_id", "filename"])

    t("LIST_USERS", "read",
      "Lists workspace members with profile details, including bots and deactivated accounts.",
      {
          "limit": LIM(200, 1000),
          "cursor": S("Pagination cursor."),
          "include_locale": B("Include each user's locale.", default=False),
      })

    t("LOOKUP_USER_BY_EMAIL", "read",
      "Finds a Slack user from the email on their profile and returns their ID, names and profile. "
      "Handy before sending a DM or building an @mention.",
      {"email": EMAIL("Email address to look up.")}, ["email"])

    t("SET_USER_STATUS", "write",
      "Sets the caller's custom status text and emoji, with an optional expiry.",
      {
          "status_text": S("Status text, e.g. 'In a meeting'.", maxLength=100),
          "status_emoji": S("Status emoji, e.g. ':calendar:'."),
          "status_expiration": I("Unix time when the status clears; 0 keeps it indefinitely.", default=0, minimum=0),
      })

    t("CREATE_REMINDER", "write",
      "Creates a Slackbot reminder for yourself or a teammate, such as 'in 2 hours' or 'every Monday at 9am'.",
      {
          "text": S("What to be reminded about."),
          "time": S("When: a Unix timestamp, seconds from now (under 24h), or natural language like 'tomorrow at 9am'."),
          "user": S("User ID to remind; defaults to the caller."),
      }, ["text", "time"])

    t("RUN_WORKFLOW_TRIGGER", "unknown",
      "Starts a Workflow Builder workflow through its webhook trigger URL with the given input variables. "
      "Whatever happens next (posting, creating records, calling other apps) depends on how the workflow was built.",
      {
          "trigger_url": URI("The workflow's webhook trigger URL (https://hooks.slack.com/triggers/...)."),
          "inputs": MAP("Variables expected by the trigger, keyed by variable name.", "string"),
      }, ["trigger_url"])


@integration("microsoft_teams", "messaging")
def _teams(t):
    team = S("ID of the team (the underlying Microsoft 365 group ID).")
    chan = S("Channel ID, e.g. '19:a1b2c3...@thread.tacv2'.")
    ctype = E(["html", "text"], "Format of `content`.", default="html")

    t("SEND_CHANNEL_MESSAGE", "send",
      "Posts a new message in a Microsoft Teams channel, starting a conversation in the channel's Posts tab. "
      "Supports HTML content, a subject line, importance and @mentions of users.",
      {
          "team_id": team,
          "channel_id": chan,
          "content": S("Message body. In HTML, reference mentions as <at id=\"0\">Display Name</at>."),
          "content_type": ctype,
          "subject": S("Optional subject line shown above the post."),
          "importance": E(["normal", "high", "urgent"], "Message importance.", default="normal"),
          "mentions": A(O({
              "id": I("Index matching the <at id=\"...\"> tag in the content.", minimum=0),
              "user_id": S("Microsoft Entra (Azure AD) object ID of the mentioned user."),
              "display_name": S("Name displayed in the mention."),
          }, "A user mention.", req=["id", "user_id", "display_name"]), "Users mentioned in the message."),
          "adaptive_card": MAP("Optional Adaptive Card JSON to attach to the message."),
      }, ["team_id", "channel_id", "content"])

    t("REPLY_TO_CHANNEL_MESSAGE", "send",
      "Adds a reply under an existing channel post in Teams, identified by the parent message ID.",
      {
          "team_id": team, "channel_id": chan,
          "message_id": S("ID of the parent channel message."),
          "content": S("Reply body."), "content_type": ctype,
      }, ["team_id", "channel_id", "message_id", "content"])

    t("SEND_CHAT_MESSAGE", "send",
      "Sends a message into an existing one-on-one, group or meeting chat in Teams (not a channel). "
      "Create the chat first with MICROSOFT_TEAMS_CREATE_CHAT if it does not exist.",
      {
          "chat_id": S("Chat ID, e.g. '19:...@unq.gbl.spaces' or '19:meeting_...@thread.v2'."),
          "content": S("Message body."), "content_type": ctype,
          "importance": E(["normal", "high", "urgent"], "Message importance.", default="normal"),
      }, ["chat_id", "content"])

    t("CREATE_CHAT", "write",
      "Creates a one-on-one or group chat with the given members. For one-on-one chats Teams hands back "
      "the existing chat when the two users already have one.",
      {
          "chat_type": E(["oneOnOne", "group"], "Kind of chat."),
          "members": STRS("User IDs or UPNs (emails) of the members, including the caller.", minItems=2),
          "topic": S("Group chat name; not allowed for oneOnOne chats."),
      }, ["chat_type", "members"])

    t("LIST_CHATS", "read",
      "Lists the chats the signed-in user belongs to, optionally with a preview of the last message.",
      {
          "filter": S("OData $filter, e.g. \"chatType eq 'group'\"."),
          "top": LIM(50, 50),
          "expand_last_message": B("Include lastMessagePreview for each chat.", default=False),
      })

    t("LIST_CHAT_MESSAGES", "read",
      "Returns the messages in a Teams chat, most recent first.",
      {"chat_id": S("Chat ID."), "top": LIM(50, 50)}, ["chat_id"])

    t("LIST_CHANNEL_MESSAGES", "read",
      "Reads the top-level posts of a team channel; replies are included only when expanded.",
      {
          "team_id": team, "channel_id": chan,
          "top": LIM(20, 50),
          "expand_replies": B("Include replies for each post.", default=False),
      }, ["team_id", "channel_id"])

    t("LIST_JOINED_TEAMS", "read", "Lists the teams the signed-in user is a direct member of.")

    t("LIST_CHANNELS", "read",
      "Lists the channels of a team, including private and shared channels the caller can access.",
      {
          "team_id": team,
          "membership_type": E(["standard", "private", "shared"], "Only return channels of this type."),
      }, ["team_id"])

    t("CREATE_CHANNEL", "write",
      "Adds a channel to a team. Private and shared channels need at least one owner.",
      {
          "team_id": team,
          "display_name": S("Channel name as shown in Teams.", maxLength=50),
          "description": S("Channel description."),
          "membership_type": E(["standard", "private", "shared"], "Channel type.", default="standard"),
          "owner_user_ids": STRS("Owners for private or shared channels."),
      }, ["team_id", "display_name"])

    t("DELETE_CHANNEL", "delete",
      "Deletes a channel from a team. The General channel can't be deleted.",
      {"team_id": team, "channel_id": chan}, ["team_id", "channel_id"])

    t("CREATE_TEAM", "write",
      "Creates a new team with a name, description, visibility and initial owner.",
      {
          "display_name": S("Team name."),
          "description": S("Team description."),
          "visibility": E(["private", "public"], "Who can find and join the team.", default="private"),
          "owner_user_id": S("User ID of the first owner (required with application permissions)."),
      }, ["display_name"])

    t("ADD_TEAM_MEMBER", "write",
      "Adds a user to a team as a member or an owner.",
      {
          "team_id": team,
          "user_id": S("Entra user ID or UPN of the person to add."),
          "role": E(["member", "owner"], "Role in the team.", default="member"),
      }, ["team_id", "user_id"])

    t("REMOVE_TEAM_MEMBER", "delete",
      "Removes someone's membership from a team, revoking access to its channels and files.",
      {"team_id": team, "membership_id": S("Membership ID returned when listing team members.")},
      ["team_id", "membership_id"])

    t("CREATE_ONLINE_MEETING", "write",
      "Creates a standalone Teams online meeting and returns the join URL, dial-in details and meeting ID. "
      "Nothing is sent to participants; share the join link yourself or use a calendar event instead.",
      {
          "subject": S("Meeting subject."),
          "start_date_time": DT("Start time (ISO 8601 with offset)."),
          "end_date_time": DT("End time (ISO 8601 with offset)."),
          "participants": EMAILS("Attendee email addresses to register on the meeting."),
          "lobby_bypass": E(["organization", "everyone", "organizer", "invited"],
                            "Who can skip the lobby.", default="organization"),
          "allow_recording": B("Whether recording is allowed.", default=True),
          "allow_meeting_chat": E(["enabled", "disabled", "limited"], "Meeting chat mode.", default="enabled"),
      }, ["start_date_time", "end_date_time"], category="meetings")

    t("SEND_ACTIVITY_NOTIFICATION", "send",
      "Sends an activity feed notification to a user on behalf of a Teams app, pointing at a chat, team or custom link.",
      {
          "user_id": S("Recipient user ID."),
          "activity_type": S("Activity type declared in the app manifest."),
          "preview_text": S("Short text shown in the feed.", maxLength=150),
          "topic_web_url": URI("Deep link opened when the notification is clicked."),
          "template_parameters": MAP("Values for the activity type's text template.", "string"),
      }, ["user_id", "activity_type", "preview_text"])

    t("GET_USER_PRESENCE", "read",
      "Shows whether a user is Available, Busy, DoNotDisturb, Away or Offline in Teams, plus their activity "
      "such as InACall or Presenting.",
      {"user_id": S("User ID or UPN.")}, ["user_id"])

    t("SET_PRESENCE", "write",
      "Sets an application presence session for a user, e.g. Busy/InAMeeting for a fixed duration.",
      {
          "user_id": S("User ID."),
          "availability": E(["Available", "Busy", "Away", "DoNotDisturb"], "Base availability."),
          "activity": E(["Available", "InACall", "InAConferenceCall", "Away", "Presenting", "InAMeeting"],
                        "Activity shown alongside availability."),
          "expiration_duration": S("ISO 8601 duration between 5 minutes and 4 hours, e.g. 'PT1H'.", default="PT5M"),
      }, ["user_id", "availability", "activity"])

    t("INVOKE_GRAPH_REQUEST", "unknown",
      "Sends an arbitrary Microsoft Graph request to a Teams endpoint (/teams, /chats, /users/.../presence) "
      "for operations without a dedicated tool. The effect depends on the method and path you pass.",
      {
          "method": E(["GET", "POST", "PATCH", "PUT", "DELETE"], "HTTP method."),
          "path": S("Graph path after the version segment, e.g. '/teams/{id}/channels'."),
          "api_version": E(["v1.0", "beta"], "Graph API version.", default="v1.0"),
          "body": MAP("JSON request body for POST/PATCH/PUT."),
      }, ["method", "path"])


@integration("discord", "messaging")
def _discord(t):
    snow = lambda d: S(d, pattern=r"^\d{17,20}$")
    embed = O({
        "title": S("Embed title.", maxLength=256),
        "description": S("Embed body text (Markdown).", maxLength=4096),
        "url": URI("Link applied to the title."),
        "color": I("Sidebar color as an integer RGB value, e.g. 5814783.", minimum=0, maximum=16777215),
        "fields": A(O({
            "name": S("Field title.", maxLength=256),
            "value": S("Field text.", maxLength=1024),
            "inline": B("Render side by side with other inline fields.", default=False),
        }, "Embed field.", req=["name", "value"]), "Up to 25 name/value fields.", maxItems=25),
        "image_url": URI("Large image shown in the embed."),
        "timestamp": DT("Timestamp shown in the footer."),
    }, "A rich embed card.")

    t("SEND_CHANNEL_MESSAGE", "send",
      "Sends a message to a Discord text channel, thread or forum post as the bot. Content is capped at "
      "2000 characters; add embeds for rich cards or reply_to_message_id to reply to someone.",
      {
          "channel_id": snow("Snowflake ID of the channel or thread."),
          "content": S("Message text (Discord Markdown).", maxLength=2000),
          "embeds": A(embed, "Rich embeds to include.", maxItems=10),
          "reply_to_message_id": snow("Send as a reply to this message."),
          "tts": B("Send as a text-to-speech message.", default=False),
          "allowed_mentions": O({
              "parse": A(E(["roles", "users", "everyone"], "Mention type."), "Mention types parsed from content."),
              "users": STRS("User IDs allowed to be pinged."),
              "replied_user": B("Ping the author of the replied-to message.", default=True),
          }, "Controls which mentions actually notify people."),
          "suppress_embeds": B("Do not render link embeds.", default=False),
      }, ["channel_id"])

    t("SEND_DIRECT_MESSAGE", "send",
      "DMs a user from the bot by opening (or reusing) a DM channel with them. The user must share a server "
      "with the bot and accept DMs.",
      {"user_id": snow("Recipient's user ID."), "content": S("Message text.", maxLength=2000),
       "embeds": A(embed, "Optional embeds.", maxItems=10)},
      ["user_id", "content"])

    t("EXECUTE_WEBHOOK", "send",
      "Posts a message through a channel webhook URL, no bot token needed. The username and avatar can be "
      "overridden per message, and thread_id targets a thread.",
      {
          "webhook_url": URI("Webhook URL (https://discord.com/api/webhooks/{id}/{token})."),
          "content": S("Message text.", maxLength=2000),
          "username": S("Override the webhook's display name."),
          "avatar_url": URI("Override the webhook's avatar."),
          "embeds": A(embed, "Rich embeds.", maxItems=10),
          "thread_id": snow("Post into this thread of the webhook's channel."),
          "wait": B("Wait for the server to confirm and return the created message.", default=False),
      }, ["webhook_url"])

    t("GET_CHANNEL_MESSAGES", "read",
      "Reads messages from a channel, newest first. Page through history with before/after/around "
      "set to a message snowflake; at most 100 per call.",
      {
          "channel_id": snow("Channel ID."),
          "limit": LIM(50, 100),
          "before": snow("Messages before this message ID."),
          "after": snow("Messages after this message ID."),
          "around": snow("Messages around this message ID."),
      }, ["channel_id"])

    t("EDIT_MESSAGE", "write", "Edits the content or embeds of a message the bot sent earlier.",
      {"channel_id": snow("Channel ID."), "message_id": snow("Message ID."),
       "content": S("New text.", maxLength=2000), "embeds": A(embed, "Replacement embeds.", maxItems=10)},
      ["channel_id", "message_id"])

    t("DELETE_MESSAGE", "delete",
      "Deletes a single message. Removing other people's messages needs the Manage Messages permission.",
      {"channel_id": snow("Channel ID."), "message_id": snow("Message ID."),
       "reason": S("Reason recorded in the server audit log.")},
      ["channel_id", "message_id"])

    t("BULK_DELETE_MESSAGES", "delete",
      "Removes 2 to 100 messages from a channel in one call. Messages older than 14 days can't be bulk deleted.",
      {"channel_id": snow("Channel ID."),
       "message_ids": STRS("IDs of the messages to delete.", minItems=2, maxItems=100)},
      ["channel_id", "message_ids"])

    t("CREATE_THREAD", "write",
      "Starts a thread in a text channel, either from an existing message or standalone. Threads auto-archive "
      "after the chosen inactivity period.",
      {
          "channel_id": snow("Parent channel ID."),
          "name": S("Thread name.", maxLength=100),
          "message_id": snow("Start the thread from this message; omit for a thread without a starter message."),
          "auto_archive_duration": E([60, 1440, 4320, 10080], "Minutes of inactivity before auto-archiving.", default=1440),
          "type": E(["public_thread", "private_thread"], "Thread visibility (standalone threads only).", default="public_thread"),
      }, ["channel_id", "name"])

    t("ADD_REACTION", "write", "Reacts to a message with a Unicode emoji or a custom server emoji.",
      {"channel_id": snow("Channel ID."), "message_id": snow("Message ID."),
       "emoji": S("Unicode emoji like '👍' or a custom emoji as 'name:id'.")},
      ["channel_id", "message_id", "emoji"])

    t("PIN_MESSAGE", "write", "Pins a message in its channel; a channel holds at most 50 pins.",
      {"channel_id": snow("Channel ID."), "message_id": snow("Message ID.")}, ["channel_id", "message_id"])

    t("LIST_GUILD_CHANNELS", "read",
      "Returns every channel in a Discord server (guild): text, voice, categories, forums and announcement "
      "channels, with positions and parent categories.",
      {"guild_id": snow("Server (guild) ID.")}, ["guild_id"])

    t("CREATE_GUILD_CHANNEL", "write",
      "Creates a text, voice, category, announcement, stage or forum channel in a server.",
      {
          "guild_id": snow("Server ID."),
          "name": S("Channel name.", maxLength=100),
          "type": E(["text", "voice", "category", "announcement", "stage", "forum"], "Channel type.", default="text"),
          "topic": S("Channel topic.", maxLength=1024),
          "parent_id": snow("Category to place the channel under."),
          "nsfw": B("Mark as age-restricted.", default=False),
          "rate_limit_per_user": I("Slowmode delay in seconds.", default=0, minimum=0, maximum=21600),
          "position": I("Sort position.", minimum=0),
      }, ["guild_id", "name"])

    t("DELETE_CHANNEL", "delete",
      "Deletes a server channel permanently (or closes a DM). Deleting a category leaves its child channels in place.",
      {"channel_id": snow("Channel ID."), "reason": S("Audit log reason.")}, ["channel_id"])

    t("LIST_GUILD_MEMBERS", "read",
      "Lists server members with nicknames, role IDs and join dates. Requires the Server Members privileged intent.",
      {"guild_id": snow("Server ID."), "limit": LIM(100, 1000),
       "after": snow("Return members whose user ID is greater than this.")},
      ["guild_id"])

    t("ADD_MEMBER_ROLE", "write", "Grants a role to a server member.",
      {"guild_id": snow("Server ID."), "user_id": snow("Member's user ID."), "role_id": snow("Role ID."),
       "reason": S("Audit log reason.")}, ["guild_id", "user_id", "role_id"])

    t("REMOVE_MEMBER_ROLE", "write", "Takes a role away from a server member without removing them from the server.",
      {"guild_id": snow("Server ID."), "user_id": snow("Member's user ID."), "role_id": snow("Role ID."),
       "reason": S("Audit log reason.")}, ["guild_id", "user_id", "role_id"])

    t("KICK_MEMBER", "delete", "Kicks a member out of the server; they can rejoin with a new invite.",
      {"guild_id": snow("Server ID."), "user_id": snow("User ID."), "reason": S("Audit log reason.")},
      ["guild_id", "user_id"])

    t("BAN_MEMBER", "delete",
      "Bans a user from the server and optionally wipes their messages from the last few days.",
      {"guild_id": snow("Server ID."), "user_id": snow("User ID."),
       "delete_message_seconds": I("Delete their messages from this many seconds back (max 7 days).",
                                   default=0, minimum=0, maximum=604800),
       "reason": S("Audit log reason.")}, ["guild_id", "user_id"])

    t("CREATE_INVITE", "write", "Generates an invite link for a channel with optional expiry and use limits.",
      {"channel_id": snow("Channel ID."),
       "max_age": I("Seconds until the invite expires; 0 never expires.", default=86400, minimum=0, maximum=604800),
       "max_uses": I("Maximum uses; 0 is unlimited.", default=0, minimum=0, maximum=100),
       "temporary": B("Grant temporary membership.", default=False),
       "unique": B("Always create a new invite instead of reusing a similar one.", default=False)},
      ["channel_id"])

    t("CREATE_SCHEDULED_EVENT", "write",
      "Schedules a server event in a stage, a voice channel or an external location that members can mark "
      "themselves interested in.",
      {
          "guild_id": snow("Server ID."),
          "name": S("Event name.", maxLength=100),
          "description": S("Event description.", maxLength=1000),
          "scheduled_start_time": DT("Start time."),
          "scheduled_end_time": DT("End time; required for external events."),
          "entity_type": E(["stage_instance", "voice", "external"], "Where the event happens."),
          "channel_id": snow("Stage or voice channel for the event."),
          "location": S("Location text for external events."),
      }, ["guild_id", "name", "scheduled_start_time", "entity_type"])


# ===========================================================================
# Email
# ===========================================================================

@integration("gmail", "email")
def _gmail(t):
    attach = A(O({
        "filename": S("File name shown to recipients."),
        "mime_type": S("MIME type, e.g. 'application/pdf'."),
        "content_base64": S("File bytes, base64 encoded.", contentEncoding="base64"),
    }, "An attachment.", req=["filename", "content_base64"]), "Files to attach (25 MB total).")

    t("SEND_EMAIL", "send",
      "Sends an email from the connected Gmail account to one or more recipients. Supports Cc/Bcc, HTML or "
      "plain-text bodies, attachments and a send-as alias; the message appears in Sent like any other.",
      {
          "to": EMAILS("Primary recipients.", minItems=1),
          "cc": EMAILS("Cc recipients."),
          "bcc": EMAILS("Bcc recipients."),
          "subject": S("Subject line."),
          "body": S("Message body."),
          "is_html": B("Treat `body` as HTML instead of plain text.", default=False),
          "attachments": attach,
          "from_alias": EMAIL("A configured send-as address to send from."),
          "reply_to": EMAIL("Address replies should go to."),
      }, ["to", "subject", "body"])

    t("CREATE_DRAFT", "write",
      "Saves a message as a Gmail draft without sending it, so someone can review it first. Pass thread_id "
      "to draft a reply within an existing conversation.",
      {
          "to": EMAILS("Recipients."), "cc": EMAILS("Cc recipients."), "bcc": EMAILS("Bcc recipients."),
          "subject": S("Subject line."), "body": S("Message body."),
          "is_html": B("Body is HTML.", default=False),
          "thread_id": S("Thread to attach the draft reply to."),
          "attachments": attach,
      }, ["body"])

    t("SEND_DRAFT", "send", "Sends a previously saved draft as-is.",
      {"draft_id": S("ID of the draft, e.g. 'r-1234567890'.")}, ["draft_id"])

    t("LIST_DRAFTS", "read", "Lists drafts in the mailbox, optionally narrowed with a Gmail search query.",
      {"q": S("Gmail search query applied to drafts."), "max_results": LIM(20, 500),
       "page_token": S("Token for the next page.")})

    t("REPLY_TO_THREAD", "send",
      "Replies within an existing Gmail conversation, setting In-Reply-To and References so the reply stays "
      "in the same thread. reply_all copies everyone on the original message.",
      {
          "thread_id": S("Thread to reply in."),
          "message_id": S("Specific message being answered; defaults to the newest in the thread."),
          "body": S("Reply text."),
          "is_html": B("Body is HTML.", default=False),
          "reply_all": B("Include all original recipients.", default=False),
          "cc": EMAILS("Extra Cc recipients."),
          "attachments": attach,
      }, ["thread_id", "body"])

    t("FORWARD_MESSAGE", "send",
      "Forwards a received email, attachments included, to new recipients with an optional note on top.",
      {"message_id": S("Message to forward."), "to": EMAILS("Forward recipients.", minItems=1),
       "note": S("Text placed above the forwarded content.")},
      ["message_id", "to"])

    t("LIST_MESSAGES", "read",
      "Searches the mailbox using the same syntax as the Gmail search box (from:, to:, subject:, "
      "has:attachment, is:unread, newer_than:7d, label:) and returns message and thread IDs.",
      {
          "q": S("Gmail search query, e.g. 'from:billing@acme.com is:unread newer_than:30d'."),
          "label_ids": STRS("Only messages carrying all these labels, e.g. ['INBOX', 'UNREAD']."),
          "include_spam_trash": B("Include Spam and Trash.", default=False),
          "max_results": LIM(50, 500),
          "page_token": S("Token for the next page."),
      })

    t("GET_MESSAGE", "read",
      "Retrieves one message with its headers, decoded body parts, labels and attachment metadata.",
      {
          "message_id": S("Message ID."),
          "format": E(["full", "metadata", "minimal", "raw"], "How much of the message to return.", default="full"),
          "metadata_headers": STRS("Headers to return when format is 'metadata', e.g. ['From', 'Subject']."),
      }, ["message_id"])

    t("GET_THREAD", "read", "Fetches a whole conversation, every message in order, by thread ID.",
      {"thread_id": S("Thread ID."),
       "format": E(["full", "metadata", "minimal"], "Detail level for each message.", default="full")},
      ["thread_id"])

    t("GET_ATTACHMENT", "read",
      "Downloads an attachment's bytes (base64url) using the attachment ID from GMAIL_GET_MESSAGE.",
      {"message_id": S("Message ID."), "attachment_id": S("Attachment ID.")}, ["message_id", "attachment_id"])

    t("MODIFY_LABELS", "write",
      "Adds or removes labels on a message. This is also how you archive (remove INBOX), mark as read "
      "(remove UNREAD) or star (add STARRED).",
      {"message_id": S("Message ID."), "add_label_ids": STRS("Label IDs to add."),
       "remove_label_ids": STRS("Label IDs to remove.")}, ["message_id"])

    t("TRASH_MESSAGE", "delete",
      "Moves a message to Trash, where Gmail permanently deletes it after 30 days.",
      {"message_id": S("Message ID.")}, ["message_id"])

    t("DELETE_MESSAGE", "delete",
      "Permanently deletes a message right away, bypassing Trash. Prefer GMAIL_TRASH_MESSAGE when in doubt.",
      {"message_id": S("Message ID.")}, ["message_id"])

    t("LIST_LABELS", "read", "Lists system and user labels in the mailbox with their IDs.")

    t("CREATE_LABEL", "write",
      "Creates a user label, optionally nested (use 'Parent/Child' as the name) and colored.",
      {
          "name": S("Label name."),
          "label_list_visibility": E(["labelShow", "labelShowIfUnread", "labelHide"], "Visibility in the label list.",
                                     default="labelShow"),
          "message_list_visibility": E(["show", "hide"], "Visibility in the message list.", default="show"),
          "background_color": S("Background color from Gmail's palette, e.g. '#16a765'."),
          "text_color": S("Text color from Gmail's palette, e.g. '#ffffff'."),
      }, ["name"])

    t("CREATE_FILTER", "write",
      "Creates a mail filter that automatically labels, archives, stars or forwards incoming mail matching the criteria.",
      {
          "criteria": O({
              "from": S("Sender to match."), "to": S("Recipient to match."),
              "subject": S("Words in the subject."), "query": S("Any Gmail search query."),
              "has_attachment": B("Only messages with attachments."),
          }, "What incoming mail to match."),
          "action": O({
              "add_label_ids": STRS("Labels to add (use INBOX removal to archive)."),
              "remove_label_ids": STRS("Labels to remove, e.g. ['INBOX'] to skip the inbox."),
              "forward": EMAIL("Verified forwarding address."),
          }, "What to do with matching mail."),
      }, ["criteria", "action"])

    t("UPDATE_VACATION_RESPONDER", "write",
      "Turns the out-of-office auto-reply on or off and sets its subject, message and active dates.",
      {
          "enable_auto_reply": B("Whether the auto-reply is on."),
          "response_subject": S("Subject of the auto-reply."),
          "response_body_plain_text": S("Plain-text reply body."),
          "start_time": DT("When replies start."),
          "end_time": DT("When replies stop."),
          "restrict_to_contacts": B("Only reply to people in Contacts.", default=False),
          "restrict_to_domain": B("Only reply to people in the same Workspace domain.", default=False),
      }, ["enable_auto_reply"])

    t("GET_PROFILE", "read",
      "Returns the authenticated Gmail address with its total message and thread counts.")


@integration("outlook", "email")
def _outlook(t):
    attach = A(O({
        "name": S("File name."),
        "content_type": S("MIME type."),
        "content_bytes": S("Base64-encoded file content.", contentEncoding="base64"),
    }, "A file attachment.", req=["name", "content_bytes"]), "File attachments (under 3 MB each for inline upload).")
    msg = S("Outlook message ID.")

    t("SEND_MAIL", "send",
      "Sends an email from the signed-in user's Outlook or Exchange Online mailbox through Microsoft Graph. "
      "The body can be HTML or text, and a copy lands in Sent Items unless disabled.",
      {
          "to": EMAILS("To recipients.", minItems=1),
          "cc": EMAILS("Cc recipients."),
          "bcc": EMAILS("Bcc recipients."),
          "subject": S("Subject line."),
          "body": S("Message body."),
          "body_type": E(["Text", "HTML"], "Format of the body.", default="HTML"),
          "importance": E(["low", "normal", "high"], "Importance flag.", default="normal"),
          "attachments": attach,
          "save_to_sent_items": B("Keep a copy in Sent Items.", default=True),
          "request_read_receipt": B("Ask recipients for a read receipt.", default=False),
      }, ["to", "subject", "body"])

    t("CREATE_DRAFT", "write",
      "Creates a message in the Drafts folder that can be edited or sent later with OUTLOOK_SEND_DRAFT.",
      {"to": EMAILS("Recipients."), "cc": EMAILS("Cc recipients."), "subject": S("Subject line."),
       "body": S("Body."), "body_type": E(["Text", "HTML"], "Body format.", default="HTML"),
       "attachments": attach})

    t("SEND_DRAFT", "send", "Sends an existing draft message from the Drafts folder.",
      {"message_id": msg}, ["message_id"])

    t("REPLY_TO_MESSAGE", "send",
      "Answers an Outlook message, either just to the sender or to everyone with reply_all. "
      "Your comment is placed above the quoted original.",
      {"message_id": msg, "comment": S("Reply text (HTML allowed)."),
       "reply_all": B("Reply to all recipients.", default=False)},
      ["message_id", "comment"])

    t("FORWARD_MESSAGE", "send", "Forwards a message to new recipients with an optional comment.",
      {"message_id": msg, "to": EMAILS("Recipients.", minItems=1), "comment": S("Text added above the original.")},
      ["message_id", "to"])

    t("LIST_MESSAGES", "read",
      "Lists messages in a mail folder (the Inbox unless told otherwise) with OData filtering, KQL search, "
      "sorting and paging. Well-known names such as inbox, sentitems, drafts and archive work in place of IDs.",
      {
          "folder": S("Folder ID or well-known name.", default="inbox"),
          "filter": S("OData $filter, e.g. 'isRead eq false and receivedDateTime ge 2024-05-01T00:00:00Z'."),
          "search": S("KQL search string, e.g. 'from:alex subject:invoice'. Cannot be combined with order_by."),
          "select": STRS("Properties to return, e.g. ['subject', 'from', 'receivedDateTime']."),
          "order_by": S("Sort order.", default="receivedDateTime desc"),
          "top": LIM(25, 1000),
          "skip": I("Number of messages to skip.", default=0, minimum=0),
      })

    t("GET_MESSAGE", "read", "Gets one message, including its body in text or HTML, sender, recipients and flags.",
      {"message_id": msg, "body_format": E(["text", "html"], "Preferred body format.", default="html")},
      ["message_id"])

    t("UPDATE_MESSAGE", "write",
      "Changes properties of a message such as read state, categories, follow-up flag or importance.",
      {"message_id": msg, "is_read": B("Mark read or unread."), "categories": STRS("Category names to set."),
       "flag_status": E(["notFlagged", "flagged", "complete"], "Follow-up flag."),
       "importance": E(["low", "normal", "high"], "Importance.")}, ["message_id"])

    t("MOVE_MESSAGE", "write", "Moves a message into another folder such as archive or a project folder.",
      {"message_id": msg, "destination_folder": S("Destination folder ID or well-known name.")},
      ["message_id", "destination_folder"])

    t("DELETE_MESSAGE", "delete",
      "Deletes a message; Exchange moves it to Deleted Items, where it stays until that folder is emptied.",
      {"message_id": msg}, ["message_id"])

    t("LIST_MAIL_FOLDERS", "read", "Returns the user's mail folders with unread and total item counts.",
      {"parent_folder_id": S("List child folders of this folder instead of the top level."),
       "include_hidden": B("Include hidden folders.", default=False)})

    t("CREATE_MAIL_FOLDER", "write", "Creates a mail folder at the top level or inside another folder.",
      {"display_name": S("Folder name."), "parent_folder_id": S("Parent folder; top level if omitted.")},
      ["display_name"])

    t("LIST_ATTACHMENTS", "read",
      "Lists attachments on a message with name, size and content type, optionally with base64 content.",
      {"message_id": msg, "include_content": B("Return contentBytes too.", default=False)}, ["message_id"])

    t("CREATE_INBOX_RULE", "write",
      "Adds a server-side Inbox rule, e.g. move everything from a sender into a folder or mark newsletters as read.",
      {
          "display_name": S("Rule name."),
          "sequence": I("Order in which the rule runs.", default=1, minimum=1),
          "conditions": O({
              "from_addresses": EMAILS("Match these senders."),
              "sender_contains": STRS("Match senders containing these strings."),
              "subject_contains": STRS("Match subjects containing these strings."),
              "body_contains": STRS("Match bodies containing these strings."),
              "has_attachments": B("Match only messages with attachments."),
          }, "When the rule applies."),
          "actions": O({
              "move_to_folder": S("Folder ID to move matches into."),
              "mark_as_read": B("Mark matches as read."),
              "assign_categories": STRS("Categories to apply."),
              "forward_to": EMAILS("Forward matches to these addresses."),
              "stop_processing_rules": B("Skip later rules after this one matches."),
          }, "What the rule does."),
          "is_enabled": B("Turn the rule on.", default=True),
      }, ["display_name", "conditions", "actions"])

    t("SET_AUTOMATIC_REPLIES", "write",
      "Configures Outlook automatic replies (out of office): on, off or scheduled, with separate internal and "
      "external messages.",
      {
          "status": E(["disabled", "alwaysEnabled", "scheduled"], "Auto-reply mode."),
          "internal_reply_message": S("Reply sent to people in the organization."),
          "external_reply_message": S("Reply sent to external senders."),
          "external_audience": E(["none", "contactsOnly", "all"], "Which external senders get a reply.", default="all"),
          "scheduled_start": DT("Start of the scheduled window."),
          "scheduled_end": DT("End of the scheduled window."),
      }, ["status"])

    t("LIST_CONTACTS", "read", "Lists people in the user's Outlook contacts, optionally filtered by a search string.",
      {"search": S("Text to match against names and email addresses."), "top": LIM(50, 1000)})

    t("CREATE_CONTACT", "write", "Adds a person to the user's Outlook contacts.",
      {"given_name": S("First name."), "surname": S("Last name."),
       "email_addresses": EMAILS("Email addresses.", maxItems=3),
       "business_phones": STRS("Work phone numbers."), "mobile_phone": S("Mobile number."),
       "company_name": S("Company."), "job_title": S("Job title.")}, ["given_name"])

    t("SEND_GRAPH_BATCH", "unknown",
      "Submits a JSON batch of up to 20 Microsoft Graph mail requests in one round trip. Each request can "
      "read, change, send or delete, so the overall effect depends on the batch contents.",
      {"requests": A(O({
          "id": S("Caller-chosen request ID."),
          "method": E(["GET", "POST", "PATCH", "PUT", "DELETE"], "HTTP method."),
          "url": S("Relative URL, e.g. '/me/messages?$top=5'."),
          "body": MAP("Request body."),
      }, "One batched request.", req=["id", "method", "url"]), "Requests to run.", minItems=1, maxItems=20)},
      ["requests"])


# ===========================================================================
# CRM
# ===========================================================================

@integration("salesforce", "crm")
def _salesforce(t):
    sid = lambda d: S(d, pattern=r"^[a-zA-Z0-9]{15}([a-zA-Z0-9]{3})?$")
    sobject = S("API name of the object, e.g. Account, Contact, Opportunity or a custom object like Invoice__c.")
    fields = MAP("Field values keyed by field API name, e.g. {\"Name\": \"Acme\", \"Industry\": \"Energy\"}.")
    stages = ["Prospecting", "Qualification", "Needs Analysis", "Value Proposition", "Id. Decision Makers",
              "Perception Analysis", "Proposal/Price Quote", "Negotiation/Review", "Closed Won", "Closed Lost"]
    address = O({
        "street": S("Street address."), "city": S("City."), "state": S("State or province."),
        "postal_code": S("ZIP or postal code."), "country": S("Country."),
    }, "Postal address.")

    t("EXECUTE_SOQL_QUERY", "read",
      "Runs a SOQL query and returns the matching records, e.g. SELECT Id, Name, StageName FROM Opportunity "
      "WHERE CloseDate = THIS_QUARTER. Follow next_records_url when more than one batch comes back.",
      {
          "query": S("SOQL statement."),
          "include_deleted": B("Use queryAll to include deleted and archived records.", default=False),
          "next_records_url": S("nextRecordsUrl from a previous response, to fetch the next batch."),
      }, ["query"])

    t("SEARCH_SOSL", "read",
      "Full-text search across several objects with SOSL, for when you don't know which object holds a record. "
      "Example: FIND {Acme*} IN NAME FIELDS RETURNING Account(Id, Name), Contact(Id, Email).",
      {"search": S("SOSL search string.")}, ["search"])

    t("DESCRIBE_SOBJECT", "read",
      "Returns an object's metadata: fields, data types, picklist values, required fields and relationships. "
      "Call it before writing SOQL or creating records on unfamiliar or custom objects.",
      {"sobject": sobject}, ["sobject"])

    t("GET_RECORD", "read", "Fetches a single record of any object by its 15- or 18-character ID.",
      {"sobject": sobject, "record_id": sid("Record ID."), "fields": STRS("Field API names to return; all if omitted.")},
      ["sobject", "record_id"])

    t("CREATE_RECORD", "write",
      "Creates a record of any standard or custom object, with field values passed as a JSON object.",
      {"sobject": sobject, "fields": fields}, ["sobject", "fields"])

    t("UPDATE_RECORD", "write", "Updates fields on an existing record of any object; unspecified fields stay as they are.",
      {"sobject": sobject, "record_id": sid("Record ID."), "fields": fields}, ["sobject", "record_id", "fields"])

    t("UPSERT_BY_EXTERNAL_ID", "write",
      "Inserts or updates a record keyed on an external ID field, so repeated syncs from another system "
      "don't create duplicates.",
      {"sobject": sobject, "external_id_field": S("External ID field API name, e.g. ERP_Id__c."),
       "external_id": S("External ID value."), "fields": fields},
      ["sobject", "external_id_field", "external_id", "fields"])

    t("DELETE_RECORD", "delete", "Deletes a record, which then sits in the Recycle Bin for 15 days.",
      {"sobject": sobject, "record_id": sid("Record ID.")}, ["sobject", "record_id"])

    t("CREATE_OPPORTUNITY", "write",
      "Creates an opportunity (a potential deal) on an account with stage, close date, amount and forecast "
      "details. Can also add products as opportunity line items from a price book and attach contact roles "
      "in the same call.",
      {
          "name": S("Opportunity name, e.g. 'Acme Corp - 500 seat renewal'.", maxLength=120),
          "account_id": sid("Account the opportunity belongs to (ID starts with 001)."),
          "stage_name": E(stages, "Sales stage. These are the default sales process values; orgs can define their "
                                  "own, so check SALESFORCE_DESCRIBE_SOBJECT if a value is rejected."),
          "close_date": DATE("Expected close date."),
          "amount": N("Estimated deal value in the opportunity currency.", minimum=0),
          "currency_iso_code": S("ISO currency code for multi-currency orgs, e.g. 'EUR'.", pattern=r"^[A-Z]{3}$"),
          "probability": N("Win probability in percent; defaults from the stage.", minimum=0, maximum=100),
          "type": E(["New Customer", "Existing Customer - Upgrade", "Existing Customer - Replacement",
                     "Existing Customer - Downgrade"], "Opportunity type."),
          "lead_source": E(["Web", "Phone Inquiry", "Partner Referral", "Purchased List", "Other"],
                           "Where the opportunity came from."),
          "forecast_category_name": E(["Omitted", "Pipeline", "Best Case", "Commit", "Closed"],
                                      "Forecast category; normally derived from the stage."),
          "next_step": S("Next action to move the deal forward.", maxLength=255),
          "description": S("Free-form notes.", maxLength=32000),
          "owner_id": sid("Owner user ID (starts with 005); defaults to the running user."),
          "campaign_id": sid("Primary campaign source (starts with 701)."),
          "pricebook2_id": sid("Price book used for line items."),
          "line_items": A(O({
              "pricebook_entry_id": sid("PricebookEntry ID of the product in the chosen price book."),
              "quantity": N("Quantity.", exclusiveMinimum=0),
              "unit_price": N("Sales price per unit; defaults to the list price."),
              "discount": N("Discount percentage.", minimum=0, maximum=100),
              "service_date": DATE("Service or delivery date."),
              "description": S("Line description."),
          }, "An OpportunityLineItem to create.", req=["pricebook_entry_id", "quantity"]),
              "Products to add to the opportunity."),
          "contact_roles": A(O({
              "contact_id": sid("Contact ID (starts with 003)."),
              "role": E(["Business User", "Decision Maker", "Economic Buyer", "Economic Decision Maker",
                         "Evaluator", "Executive Sponsor", "Influencer", "Technical Buyer", "Other"],
                        "Role of the contact in the deal."),
              "is_primary": B("Mark as the primary contact.", default=False),
          }, "An OpportunityContactRole.", req=["contact_id"]), "People involved in the deal."),
          "custom_fields": MAP("Extra fields by API name, including custom fields ending in __c, "
                               "e.g. {\"Competitor__c\": \"Globex\"}."),
      }, ["name", "stage_name", "close_date"])

    t("UPDATE_OPPORTUNITY", "write",
      "Moves an opportunity to a new stage, or changes its amount, close date, next step or owner. "
      "Only the fields you pass are changed.",
      {
          "opportunity_id": sid("Opportunity ID (starts with 006)."),
          "stage_name": E(stages, "New stage."),
          "amount": N("New amount.", minimum=0),
          "close_date": DATE("New close date."),
          "probability": N("Win probability in percent.", minimum=0, maximum=100),
          "next_step": S("Next step.", maxLength=255),
          "forecast_category_name": E(["Omitted", "Pipeline", "Best Case", "Commit", "Closed"], "Forecast category."),
          "owner_id": sid("New owner user ID."),
          "custom_fields": MAP("Other fields by API name."),
      }, ["opportunity_id"])

    t("CREATE_LEAD", "write",
      "Adds a lead, an unqualified prospect, with company, contact details and lead source. "
      "Salesforce requires LastName and Company.",
      {
          "first_name": S("First name."), "last_name": S("Last name."), "company": S("Company name."),
          "email": EMAIL("Email."), "phone": S("Phone."), "title": S("Job title."),
          "lead_source": E(["Web", "Phone Inquiry", "Partner Referral", "Purchased List", "Other"], "Lead source."),
          "status": E(["Open - Not Contacted", "Working - Contacted", "Closed - Converted", "Closed - Not Converted"],
                      "Lead status.", default="Open - Not Contacted"),
          "industry": S("Industry."),
          "annual_revenue": N("Annual revenue.", minimum=0),
          "number_of_employees": I("Employee count.", minimum=0),
          "owner_id": sid("Owner user or queue ID."),
      }, ["last_name", "company"])

    t("CONVERT_LEAD", "write",
      "Converts a qualified lead into an account, a contact and optionally an opportunity, or merges it "
      "into an existing account and contact.",
      {
          "lead_id": sid("Lead ID (starts with 00Q)."),
          "converted_status": S("A lead status marked as converted, e.g. 'Closed - Converted'."),
          "account_id": sid("Existing account to merge into."),
          "contact_id": sid("Existing contact to merge into."),
          "do_not_create_opportunity": B("Skip creating an opportunity.", default=False),
          "opportunity_name": S("Name for the new opportunity."),
          "owner_id": sid("Owner of the new records."),
      }, ["lead_id", "converted_status"])

    t("CREATE_ACCOUNT", "write", "Creates an account (a company or organization you do business with).",
      {
          "name": S("Account name."),
          "type": E(["Prospect", "Customer - Direct", "Customer - Channel", "Partner", "Other"], "Account type."),
          "industry": S("Industry."), "website": URI("Website."), "phone": S("Main phone."),
          "billing_address": address,
          "annual_revenue": N("Annual revenue.", minimum=0),
          "number_of_employees": I("Employees.", minimum=0),
          "parent_id": sid("Parent account for hierarchies."),
          "owner_id": sid("Owner user ID."),
      }, ["name"])

    t("CREATE_CONTACT", "write", "Creates a contact, usually linked to an account.",
      {
          "account_id": sid("Account ID."), "first_name": S("First name."), "last_name": S("Last name."),
          "email": EMAIL("Email."), "phone": S("Phone."), "mobile_phone": S("Mobile."),
          "title": S("Title."), "department": S("Department."), "mailing_address": address,
      }, ["last_name"])

    t("CREATE_CASE", "write",
      "Opens a customer support case tied to an account and contact, with origin, priority and status.",
      {
          "subject": S("Case subject."), "description": S("Details of the issue."),
          "account_id": sid("Account ID."), "contact_id": sid("Contact ID."),
          "status": E(["New", "Working", "Escalated", "Closed"], "Status.", default="New"),
          "priority": E(["High", "Medium", "Low"], "Priority.", default="Medium"),
          "origin": E(["Phone", "Email", "Web"], "Channel the case came from."),
          "type": S("Case type, e.g. 'Problem' or 'Question'."),
          "owner_id": sid("User or queue ID to own the case."),
      }, ["subject"])

    t("CREATE_TASK", "write",
      "Logs a call or creates a follow-up task (the Task object) on a lead, contact, account or opportunity. "
      "Use who_id for people and what_id for accounts, opportunities and cases.",
      {
          "subject": S("Task subject, e.g. 'Call'."),
          "who_id": sid("Lead or contact ID."), "what_id": sid("Account, opportunity or case ID."),
          "activity_date": DATE("Due date."),
          "status": E(["Not Started", "In Progress", "Completed"], "Status.", default="Not Started"),
          "priority": E(["High", "Normal", "Low"], "Priority.", default="Normal"),
          "task_subtype": E(["Task", "Call", "Email"], "Subtype; 'Call' logs a call.", default="Task"),
          "description": S("Comments."),
          "owner_id": sid("Assigned user ID."),
      }, ["subject"])

    t("ADD_CAMPAIGN_MEMBER", "write", "Adds a lead or contact to a campaign with a member status such as Sent or Responded.",
      {"campaign_id": sid("Campaign ID."), "lead_id": sid("Lead ID."), "contact_id": sid("Contact ID."),
       "status": S("Campaign member status.", default="Sent")}, ["campaign_id"])

    t("LIST_REPORTS", "read", "Lists recently viewed reports, or those whose name matches a search term.",
      {"q": S("Filter by report name.")})

    t("RUN_REPORT", "read",
      "Runs a report synchronously and returns its summary and detail rows. Filters passed here override "
      "the report's saved filters for this run only.",
      {
          "report_id": sid("Report ID (starts with 00O)."),
          "include_details": B("Return detail rows, not just groupings and totals.", default=True),
          "filters": A(O({
              "column": S("Column API name, e.g. 'OPPORTUNITY.STAGE_NAME'."),
              "operator": E(["equals", "notEqual", "lessThan", "greaterThan", "lessOrEqual", "greaterOrEqual",
                             "contains", "notContain", "startsWith"], "Comparison operator."),
              "value": S("Value to compare against."),
          }, "A report filter.", req=["column", "operator", "value"]), "Filters for this run."),
      }, ["report_id"])

    t("SEND_EMAIL", "send",
      "Sends an email from Salesforce and optionally logs it as an activity on a related record.",
      {"to": EMAILS("Recipients.", minItems=1), "subject": S("Subject."), "body": S("Plain-text body."),
       "related_record_id": sid("Record to log the email against."),
       "log_activity": B("Log the email as an activity.", default=True)},
      ["to", "subject", "body"])

    t("INVOKE_FLOW", "unknown",
      "Runs an autolaunched Flow by API name with input variables. What it does (updating records, sending "
      "email, calling out to other systems) is defined in Flow Builder, so the effect can't be known here.",
      {"flow_api_name": S("Flow API name, e.g. 'Renewal_Handoff'."),
       "inputs": MAP("Input variables keyed by name.")}, ["flow_api_name"])

    t("EXECUTE_APEX_REST", "unknown",
      "Calls a custom Apex REST endpoint under /services/apexrest/. Its behaviour is whatever the org's developers implemented.",
      {
          "method": E(["GET", "POST", "PATCH", "PUT", "DELETE"], "HTTP method."),
          "url_path": S("Path after /services/apexrest/, e.g. 'v1/orders/sync'."),
          "query_params": MAP("Query string parameters.", "string"),
          "body": MAP("JSON request body."),
      }, ["method", "url_path"])


@integration("hubspot", "crm")
def _hubspot(t):
    props = MAP("Other HubSpot properties by internal name, e.g. {\"industry\": \"SOFTWARE\"}.")
    ids = lambda d: STRS(d)
    stage = E(["subscriber", "lead", "marketingqualifiedlead", "salesqualifiedlead", "opportunity", "customer",
               "evangelist", "other"], "Lifecycle stage.")

    t("CREATE_CONTACT", "write",
      "Creates a contact in HubSpot CRM. Email is the unique key, so a second contact with the same email is "
      "rejected; update the existing one instead.",
      {
          "email": EMAIL("Email address."), "firstname": S("First name."), "lastname": S("Last name."),
          "phone": S("Phone number."), "company": S("Company name (text, not an association)."),
          "jobtitle": S("Job title."), "lifecyclestage": stage,
          "hs_lead_status": E(["NEW", "OPEN", "IN_PROGRESS", "OPEN_DEAL", "UNQUALIFIED", "ATTEMPTED_TO_CONTACT",
                               "CONNECTED", "BAD_TIMING"], "Lead status."),
          "hubspot_owner_id": S("Owner ID from HUBSPOT_LIST_OWNERS."),
          "associated_company_id": S("Company record to associate the contact with."),
          "additional_properties": props,
      }, ["email"])

    t("UPDATE_CONTACT", "write", "Updates contact properties, identifying the contact by record ID or by email.",
      {"contact_id": S("Record ID, or the email when id_property is 'email'."),
       "id_property": E(["hs_object_id", "email"], "How contact_id should be interpreted.", default="hs_object_id"),
       "properties": MAP("Properties to set, by internal name.")}, ["contact_id", "properties"])

    t("GET_CONTACT", "read", "Fetches a contact with the requested properties and associated record IDs.",
      {"contact_id": S("Record ID."), "properties": STRS("Properties to return."),
       "associations": A(E(["companies", "deals", "tickets"], "Object type."), "Associated objects to include.")},
      ["contact_id"])

    t("SEARCH_CRM_OBJECTS", "read",
      "Searches contacts, companies, deals or tickets using HubSpot's CRM search. Filters within a group are "
      "AND-ed and up to five groups are OR-ed, with sorting and an optional free-text query.",
      {
          "object_type": E(["contacts", "companies", "deals", "tickets"], "CRM object to search."),
          "query": S("Free-text search across default searchable properties."),
          "filter_groups": A(O({
              "filters": A(O({
                  "property_name": S("Internal property name, e.g. 'dealstage'."),
                  "operator": E(["EQ", "NEQ", "LT", "LTE", "GT", "GTE", "BETWEEN", "IN", "NOT_IN", "HAS_PROPERTY",
                                 "NOT_HAS_PROPERTY", "CONTAINS_TOKEN", "NOT_CONTAINS_TOKEN"], "Operator."),
                  "value": S("Value for single-value operators."),
                  "values": STRS("Values for IN / NOT_IN."),
                  "high_value": S("Upper bound for BETWEEN."),
              }, "A filter.", req=["property_name", "operator"]), "Filters combined with AND.", maxItems=6),
          }, "A filter group.", req=["filters"]), "Filter groups combined with OR.", maxItems=5),
          "sorts": A(O({"property_name": S("Property to sort by."),
                        "direction": E(["ASCENDING", "DESCENDING"], "Direction.")},
                       "Sort rule.", req=["property_name"]), "Sort order.", maxItems=1),
          "properties": STRS("Properties to include in results."),
          "limit": LIM(10, 200),
          "after": S("Paging cursor."),
      }, ["object_type"])

    t("ARCHIVE_CONTACT", "delete", "Archives a contact; it can be restored from the recycling bin for 90 days.",
      {"contact_id": S("Record ID.")}, ["contact_id"])

    t("CREATE_COMPANY", "write", "Creates a company record, keyed loosely by its domain.",
      {"name": S("Company name."), "domain": S("Primary website domain, e.g. 'acme.com'."),
       "industry": S("Industry enum value, e.g. 'COMPUTER_SOFTWARE'."), "city": S("City."), "country": S("Country."),
       "phone": S("Phone."), "numberofemployees": I("Employee count.", minimum=0),
       "annualrevenue": N("Annual revenue.", minimum=0), "hubspot_owner_id": S("Owner ID."),
       "additional_properties": props}, ["name"])

    t("CREATE_DEAL", "write",
      "Creates a deal in a sales pipeline and can associate it with contacts and companies in the same call. "
      "Look up valid pipeline and stage IDs with HUBSPOT_LIST_PIPELINES.",
      {
          "dealname": S("Deal name."),
          "pipeline": S("Pipeline ID.", default="default"),
          "dealstage": S("Stage ID, e.g. 'appointmentscheduled', 'qualifiedtobuy', 'closedwon', or a numeric ID in custom pipelines."),
          "amount": N("Deal amount.", minimum=0),
          "closedate": DT("Expected close date."),
          "dealtype": E(["newbusiness", "existingbusiness"], "Deal type."),
          "hs_priority": E(["low", "medium", "high"], "Priority."),
          "description": S("Deal description."),
          "hubspot_owner_id": S("Owner ID."),
          "contact_ids": ids("Contacts to associate."),
          "company_ids": ids("Companies to associate."),
          "additional_properties": props,
      }, ["dealname", "dealstage"])

    t("UPDATE_DEAL", "write", "Updates a deal's properties, for example moving it to another dealstage or changing the amount.",
      {"deal_id": S("Deal record ID."), "properties": MAP("Properties to set.")}, ["deal_id", "properties"])

    t("LIST_DEALS", "read", "Pages through deals with the chosen properties.",
      {"limit": LIM(10, 100), "after": S("Paging cursor."), "properties": STRS("Properties to return."),
       "archived": B("Return archived deals instead.", default=False)})

    t("LIST_PIPELINES", "read", "Lists deal or ticket pipelines together with their stages, stage IDs and order.",
      {"object_type": E(["deals", "tickets"], "Pipeline object type.", default="deals")})

    t("CREATE_ASSOCIATION", "write",
      "Links two CRM records (e.g. a contact to a company, or a deal to a ticket) with the default association type.",
      {"from_object_type": S("e.g. 'contacts'."), "from_object_id": S("Source record ID."),
       "to_object_type": S("e.g. 'companies'."), "to_object_id": S("Target record ID.")},
      ["from_object_type", "from_object_id", "to_object_type", "to_object_id"])

    t("CREATE_NOTE", "write",
      "Adds a note to the timeline of contacts, companies or deals. Basic HTML is allowed in the body.",
      {"body": S("Note body."), "timestamp": DT("When the note applies; defaults to now."),
       "contact_ids": ids("Contacts."), "company_ids": ids("Companies."), "deal_ids": ids("Deals."),
       "hubspot_owner_id": S("Owner ID.")}, ["body"])

    t("CREATE_TASK", "write",
      "Creates a CRM task such as a follow-up call, with due date, priority and owner, attached to records.",
      {"subject": S("Task title."), "body": S("Notes."), "due_date": DT("Due date and time."),
       "task_type": E(["CALL", "EMAIL", "TODO"], "Task type.", default="TODO"),
       "priority": E(["LOW", "MEDIUM", "HIGH"], "Priority."),
       "status": E(["NOT_STARTED", "COMPLETED"], "Status.", default="NOT_STARTED"),
       "hubspot_owner_id": S("Assignee owner ID."), "contact_ids": ids("Contacts."), "deal_ids": ids("Deals.")},
      ["subject", "due_date"])

    t("CREATE_TICKET", "write",
      "Opens a Service Hub ticket in a ticket pipeline with subject, description and priority, linked to a contact.",
      {"subject": S("Ticket subject."), "content": S("Description."),
       "hs_pipeline": S("Pipeline ID.", default="0"),
       "hs_pipeline_stage": S("Stage ID; '1' is New in the default pipeline."),
       "hs_ticket_priority": E(["LOW", "MEDIUM", "HIGH", "URGENT"], "Priority."),
       "hubspot_owner_id": S("Owner ID."), "contact_ids": ids("Contacts."), "company_ids": ids("Companies.")},
      ["subject", "hs_pipeline_stage"], category="ticketing")

    t("LIST_OWNERS", "read",
      "Lists HubSpot users who can own records, with owner IDs, names and emails. Use it to turn a person "
      "into a hubspot_owner_id.",
      {"email": EMAIL("Only return the owner with this email."), "limit": LIM(100, 500), "after": S("Paging cursor.")})

    t("ADD_CONTACTS_TO_LIST", "write", "Adds contacts to a static (manually managed) list by record ID.",
      {"list_id": S("List ID."), "contact_ids": STRS("Contact record IDs.", minItems=1, maxItems=500)},
      ["list_id", "contact_ids"])

    t("SEND_TRANSACTIONAL_EMAIL", "send",
      "Sends one transactional email built from a HubSpot email template (Single Send API, requires the "
      "transactional email add-on), filling personalization tokens from the values you pass.",
      {"email_id": I("ID of the transactional email in HubSpot.", minimum=1), "to": EMAIL("Recipient."),
       "cc": EMAILS("Cc recipients."), "bcc": EMAILS("Bcc recipients."),
       "contact_properties": MAP("Contact properties to set while sending.", "string"),
       "custom_properties": MAP("Values for custom template tokens.")}, ["email_id", "to"], category="email")

    t("ENROLL_IN_SEQUENCE", "send",
      "Enrolls a contact in a sales sequence, which then emails them the sequence's templates from the chosen sender on a schedule.",
      {"sequence_id": S("Sequence ID."), "contact_id": S("Contact record ID."),
       "sender_email": EMAIL("Connected inbox the sequence sends from.")},
      ["sequence_id", "contact_id", "sender_email"])

    t("SEND_RAW_API_REQUEST", "unknown",
      "Calls any HubSpot API endpoint that lacks a dedicated tool; what happens depends on the method and path.",
      {"method": E(["GET", "POST", "PATCH", "PUT", "DELETE"], "HTTP method."),
       "path": S("Path such as '/crm/v3/objects/line_items'."),
       "query": MAP("Query parameters.", "string"), "body": MAP("JSON body.")}, ["method", "path"])


@integration("pipedrive", "crm")
def _pipedrive(t):
    pid = lambda d: I(d, minimum=1)
    visible = E(["1", "3", "5", "7"], "Visibility group: 1 owner only, 3 owner's visibility group, 5 owner's group "
                                      "and sub-groups, 7 entire company (exact meaning depends on plan).")

    t("ADD_DEAL", "write",
      "Creates a Pipedrive deal linked to a person and/or organization and drops it into a pipeline stage.",
      {
          "title": S("Deal title."), "value": N("Deal value.", minimum=0), "currency": S("ISO currency code, e.g. 'USD'."),
          "person_id": pid("Linked person."), "org_id": pid("Linked organization."),
          "pipeline_id": pid("Pipeline."), "stage_id": pid("Stage; first stage of the pipeline if omitted."),
          "status": E(["open", "won", "lost"], "Deal status.", default="open"),
          "expected_close_date": DATE("Expected close date."),
          "probability": I("Success probability percent.", minimum=0, maximum=100),
          "user_id": pid("Owner user ID."), "visible_to": visible,
      }, ["title"])

    t("UPDATE_DEAL", "write",
      "Changes a deal: move it to another stage, mark it won or lost (with a lost_reason), or hand it to another owner.",
      {"deal_id": pid("Deal ID."), "title": S("Title."), "value": N("Value."), "stage_id": pid("New stage."),
       "status": E(["open", "won", "lost", "deleted"], "Status."), "lost_reason": S("Why the deal was lost."),
       "user_id": pid("New owner."), "expected_close_date": DATE("Expected close date.")}, ["deal_id"])

    t("GET_DEAL", "read", "Fetches one deal with its person, organization, stage and custom field values.",
      {"deal_id": pid("Deal ID.")}, ["deal_id"])

    t("LIST_DEALS", "read",
      "Lists deals, optionally restricted to a saved filter, stage, owner or status, using start/limit paging.",
      {"filter_id": pid("Saved filter ID."), "stage_id": pid("Stage ID."), "user_id": pid("Owner ID."),
       "status": E(["open", "won", "lost", "deleted", "all_not_deleted"], "Status.", default="all_not_deleted"),
       "sort": S("Sort spec, e.g. 'update_time DESC'."), "start": I("Offset.", default=0, minimum=0),
       "limit": LIM(100, 500)})

    t("SEARCH_DEALS", "read",
      "Searches deals by title, notes and custom fields (term of at least 2 characters), optionally within "
      "one person's or organization's deals.",
      {"term": S("Search term.", minLength=2),
       "fields": A(E(["title", "notes", "custom_fields"], "Field."), "Fields to search."),
       "exact_match": B("Only exact matches.", default=False), "person_id": pid("Person filter."),
       "organization_id": pid("Organization filter."), "status": E(["open", "won", "lost"], "Status filter."),
       "limit": LIM(50, 500)}, ["term"])

    t("DELETE_DEAL", "delete", "Marks a deal as deleted; Pipedrive purges it for good after 30 days.",
      {"deal_id": pid("Deal ID.")}, ["deal_id"])

    contact_pt = lambda what: A(O({
        "value": S(what + "."), "primary": B("Primary " + what.lower() + ".", default=False),
        "label": E(["work", "home", "mobile", "other"], "Label.", default="work"),
    }, what + " entry.", req=["value"]), what + " entries.")
    t("ADD_PERSON", "write", "Adds a person (contact) with emails and phone numbers, optionally linked to an organization.",
      {"name": S("Full name."), "email": contact_pt("Email"), "phone": contact_pt("Phone"),
       "org_id": pid("Organization ID."), "owner_id": pid("Owner user ID."),
       "marketing_status": E(["no_consent", "unsubscribed", "subscribed", "archived"], "Email marketing consent."),
       "visible_to": visible}, ["name"])

    t("SEARCH_PERSONS", "read", "Finds people by name, email, phone or notes.",
      {"term": S("Search term.", minLength=2),
       "fields": A(E(["name", "email", "phone", "notes", "custom_fields"], "Field."), "Fields to search."),
       "organization_id": pid("Limit to this organization."), "exact_match": B("Exact match.", default=False),
       "limit": LIM(50, 500)}, ["term"])

    t("DELETE_PERSON", "delete", "Deletes a person; linked deals and activities stay but lose the link.",
      {"person_id": pid("Person ID.")}, ["person_id"])

    t("ADD_ORGANIZATION", "write", "Creates an organization record.",
      {"name": S("Organization name."), "owner_id": pid("Owner."), "address": S("Full address."),
       "visible_to": visible}, ["name"])

    t("ADD_ACTIVITY", "write",
      "Schedules an activity (call, meeting, task, deadline, email or lunch) against a deal, person or organization.",
      {"subject": S("Activity subject."),
       "type": E(["call", "meeting", "task", "deadline", "email", "lunch"], "Activity type key."),
       "due_date": DATE("Due date."), "due_time": S("Due time, HH:MM in UTC.", pattern=r"^\d{2}:\d{2}$"),
       "duration": S("Duration, HH:MM.", pattern=r"^\d{2}:\d{2}$"),
       "deal_id": pid("Deal."), "person_id": pid("Person."), "org_id": pid("Organization."),
       "note": S("Note (HTML allowed)."), "done": B("Already completed.", default=False),
       "user_id": pid("Assignee.")}, ["subject", "type"])

    t("UPDATE_ACTIVITY", "write", "Edits an activity; set done to true to tick it off.",
      {"activity_id": pid("Activity ID."), "done": B("Mark as done."), "due_date": DATE("New due date."),
       "subject": S("Subject."), "note": S("Note.")}, ["activity_id"])

    t("LIST_ACTIVITIES", "read", "Lists activities for a user, optionally by type, completion and date range.",
      {"user_id": pid("User; 0 means everyone the token can see."), "type": S("Activity type key."),
       "done": B("Completed (true) or open (false) activities."),
       "start_date": DATE("From date."), "end_date": DATE("To date."), "limit": LIM(100, 500)})

    t("ADD_NOTE", "write",
      "Attaches an HTML note to a deal, person, organization or lead, optionally pinned to the top.",
      {"content": S("Note content (HTML)."), "deal_id": pid("Deal."), "person_id": pid("Person."),
       "org_id": pid("Organization."), "lead_id": S("Lead UUID.", format="uuid"),
       "pinned_to_deal_flag": B("Pin on the deal.", default=False)}, ["content"])

    t("LIST_PIPELINES", "read", "Returns all sales pipelines with their IDs and order.")

    t("LIST_STAGES", "read", "Lists stages, optionally for a single pipeline, with IDs and deal probabilities.",
      {"pipeline_id": pid("Pipeline ID.")})

    t("ADD_LEAD", "write",
      "Creates a lead in the Leads Inbox, linked to a person or organization, before it graduates into a deal.",
      {"title": S("Lead title."), "person_id": pid("Person."), "organization_id": pid("Organization."),
       "owner_id": pid("Owner."),
       "value": O({"amount": N("Amount.", minimum=0), "currency": S("Currency code.")}, "Potential value.",
                  req=["amount", "currency"]),
       "expected_close_date": DATE("Expected close date."),
       "label_ids": A({"type": "string", "format": "uuid"}, "Lead label IDs.")}, ["title"])

    t("ADD_PRODUCT_TO_DEAL", "write", "Attaches a catalog product to a deal with price, quantity and discount.",
      {"deal_id": pid("Deal."), "product_id": pid("Product."), "item_price": N("Unit price."),
       "quantity": I("Quantity.", minimum=1), "discount": N("Discount amount or percentage.", minimum=0),
       "discount_type": E(["percentage", "amount"], "How to read discount.", default="percentage"),
       "tax": N("Tax percentage.", minimum=0), "comments": S("Line comment.")},
      ["deal_id", "product_id", "item_price", "quantity"])


# ===========================================================================
# Ticketing / customer support
# ===========================================================================

@integration("zendesk", "ticketing")
def _zendesk(t):
    tid = I("Ticket ID.", minimum=1)
    priority = E(["urgent", "high", "normal", "low"], "Ticket priority.")
    status = E(["new", "open", "pending", "hold", "solved"], "Ticket status.")
    custom = A(O({"id": I("Custom ticket field ID."), "value": V("Field value.")}, "Custom field value.",
                 req=["id", "value"]), "Custom ticket field values.")

    t("CREATE_TICKET", "write",
      "Creates a Zendesk Support ticket with a subject and first comment, plus optional requester, priority, "
      "type, group, assignee, tags and custom field values.",
      {
          "subject": S("Ticket subject."),
          "comment": O({"body": S("Plain-text comment."), "html_body": S("HTML comment (instead of body)."),
                        "public": B("Whether the requester can see the first comment.", default=True)},
                       "The first comment, which becomes the ticket description."),
          "requester": O({"name": S("Requester name."), "email": EMAIL("Requester email.")},
                         "Requester; created as an end user if unknown.", req=["email"]),
          "priority": priority, "status": status,
          "type": E(["problem", "incident", "question", "task"], "Ticket type."),
          "assignee_id": I("Agent ID."), "group_id": I("Group ID."),
          "tags": STRS("Tags."), "custom_fields": custom,
          "due_at": DT("Due date for task tickets."),
          "external_id": S("ID from another system."),
      }, ["comment"])

    t("UPDATE_TICKET", "write",
      "Changes a ticket's status, priority, assignee, group, tags or custom fields without adding a comment.",
      {"ticket_id": tid, "status": status, "priority": priority, "assignee_id": I("Agent ID."),
       "group_id": I("Group ID."), "tags": STRS("Replaces all tags."),
       "additional_tags": STRS("Tags to add without removing existing ones."), "custom_fields": custom},
      ["ticket_id"])

    t("REPLY_TO_TICKET", "send",
      "Adds a public reply to a ticket, which Zendesk emails to the requester and CCs. "
      "You can change the status in the same update, e.g. to pending while waiting on the customer.",
      {"ticket_id": tid, "body": S("Reply text."), "html_body": S("HTML reply (instead of body)."),
       "author_id": I("Agent to post as; defaults to the token's user."), "status": status,
       "uploads": STRS("Upload tokens for attachments.")}, ["ticket_id", "body"])

    t("ADD_INTERNAL_NOTE", "write",
      "Leaves a private note on a ticket that only agents can see, good for handoffs and investigation notes.",
      {"ticket_id": tid, "body": S("Note text."), "author_id": I("Agent to post as.")}, ["ticket_id", "body"])

    t("GET_TICKET", "read", "Fetches a ticket with its fields, tags and status, optionally sideloading related records.",
      {"ticket_id": tid, "include": A(E(["users", "groups", "organizations", "comment_count"], "Sideload."),
                                      "Related records to sideload.")}, ["ticket_id"])

    t("LIST_TICKET_COMMENTS", "read",
      "Returns the conversation on a ticket, public replies and internal notes alike, oldest first by default.",
      {"ticket_id": tid, "sort_order": E(["asc", "desc"], "Order.", default="asc"),
       "include_inline_images": B("Include inline images as attachments.", default=False)}, ["ticket_id"])

    t("SEARCH", "read",
      "Runs a Zendesk search across tickets, users and organizations, "
      "e.g. 'type:ticket status<solved priority:urgent assignee:me tags:billing'.",
      {"query": S("Search query."),
       "sort_by": E(["updated_at", "created_at", "priority", "status", "ticket_type"], "Sort field."),
       "sort_order": E(["asc", "desc"], "Order.", default="desc"),
       "per_page": LIM(25, 100), "page": I("Page number.", default=1, minimum=1)}, ["query"])

    t("DELETE_TICKET", "delete",
      "Deletes a ticket; it sits in Deleted tickets for 30 days before it is gone for good.",
      {"ticket_id": tid}, ["ticket_id"])

    t("MERGE_TICKETS", "write",
      "Merges source tickets into a target ticket, closing the sources and carrying their comments across.",
      {"target_ticket_id": tid, "source_ticket_ids": INTS("Tickets to merge in.", minItems=1),
       "target_comment": S("Comment added to the target."), "source_comment": S("Comment added to each source."),
       "target_comment_is_public": B("Make the target comment public.", default=False)},
      ["target_ticket_id", "source_ticket_ids"])

    t("LIST_VIEWS", "read", "Lists ticket views such as 'Unassigned tickets' or 'My open tickets'.",
      {"active": B("Only active views.", default=True), "group_id": I("Views shared with this group.")})

    t("GET_VIEW_TICKETS", "read", "Returns the tickets currently matching a view.",
      {"view_id": I("View ID."), "sort_by": S("Sort column, e.g. 'updated'."),
       "sort_order": E(["asc", "desc"], "Order."), "per_page": LIM(25, 100)}, ["view_id"])

    t("LIST_MACROS", "read", "Lists the macros available to the agent, with their titles and actions.",
      {"active": B("Only active macros.", default=True), "category": I("Macro category ID.")})

    t("PREVIEW_MACRO", "read",
      "Shows what a macro would change on a ticket (comment, status, fields) without saving anything. "
      "Apply the result with ZENDESK_UPDATE_TICKET.",
      {"ticket_id": tid, "macro_id": I("Macro ID.")}, ["ticket_id", "macro_id"])

    t("CREATE_USER", "write",
      "Creates an end user, agent or admin. End users are usually created implicitly when they email support.",
      {"name": S("Full name."), "email": EMAIL("Email."),
       "role": E(["end-user", "agent", "admin"], "Role.", default="end-user"),
       "organization_id": I("Organization."), "phone": S("Phone."), "external_id": S("External ID."),
       "verified": B("Skip the verification email.", default=False),
       "user_fields": MAP("Custom user field values by key.")}, ["name"])

    t("CREATE_ORGANIZATION", "write", "Creates an organization; domain names auto-assign matching new users to it.",
      {"name": S("Name."), "domain_names": STRS("Email domains."), "details": S("Details."),
       "notes": S("Notes."), "tags": STRS("Tags."),
       "organization_fields": MAP("Custom organization field values.")}, ["name"])

    t("CREATE_HELP_CENTER_ARTICLE", "write",
      "Writes a Help Center article in a section, as a draft or published, for a given permission group.",
      {"section_id": I("Section ID."), "title": S("Article title."), "body": S("Article HTML."),
       "locale": S("Locale.", default="en-us"), "draft": B("Keep as draft.", default=True),
       "permission_group_id": I("Permission group that can edit."),
       "user_segment_id": I("Audience segment; null for everyone."), "label_names": STRS("Labels.")},
      ["section_id", "title", "body", "permission_group_id"], category="docs")

    t("EXECUTE_API_REQUEST", "unknown",
      "Sends a raw request to any Zendesk API path for operations without a dedicated tool. "
      "The effect depends on the method and endpoint.",
      {"method": E(["GET", "POST", "PUT", "DELETE"], "HTTP method."),
       "path": S("Path beginning with /api/v2/."), "query": MAP("Query parameters.", "string"),
       "body": MAP("JSON body.")}, ["method", "path"])


@integration("intercom", "ticketing")
def _intercom(t):
    query = O({
        "field": S("Field to filter on, e.g. 'email' or 'custom_attributes.plan'."),
        "operator": E(["=", "!=", "IN", "NIN", "<", ">", "~", "!~", "^", "$", "AND", "OR"],
                      "Comparison operator, or AND/OR for a nested group."),
        "value": V("Comparison value (omit for AND/OR groups)."),
        "value_list": STRS("Values for IN / NIN."),
        "conditions": A(MAP("A nested condition with the same shape."), "Nested conditions for AND/OR groups."),
    }, "Search query in Intercom's filter language.", req=["operator"])
    pag = O({"per_page": LIM(20, 150), "starting_after": S("Cursor from the previous page.")}, "Pagination.")
    admin = S("ID of the admin (teammate) performing the action.")

    t("CREATE_CONTACT", "write",
      "Creates a user or lead in Intercom. Users need an email or external_id; leads can stay anonymous.",
      {"role": E(["user", "lead"], "Contact role."), "email": EMAIL("Email."),
       "external_id": S("Your own user ID."), "name": S("Full name."), "phone": S("Phone."),
       "owner_id": I("Admin who owns the contact."),
       "signed_up_at": I("Sign-up time as Unix seconds.", minimum=0),
       "custom_attributes": MAP("Custom data attributes.")}, ["role"])

    t("UPDATE_CONTACT", "write", "Updates a contact's details, custom attributes or email subscription.",
      {"contact_id": S("Intercom contact ID."), "email": EMAIL("Email."), "name": S("Name."), "phone": S("Phone."),
       "owner_id": I("Owner admin ID."), "custom_attributes": MAP("Custom attributes."),
       "unsubscribed_from_emails": B("Opt the contact out of email.")}, ["contact_id"])

    t("SEARCH_CONTACTS", "read",
      "Searches contacts using nested AND/OR field filters, e.g. email ~ '@acme.com' AND last_seen_at > a date.",
      {"query": query, "pagination": pag}, ["query"])

    t("DELETE_CONTACT", "delete", "Permanently deletes a contact and its data.",
      {"contact_id": S("Contact ID.")}, ["contact_id"])

    t("SEND_MESSAGE", "send",
      "Starts an outbound message from an admin to a contact, delivered in-app through the Messenger or as an email. "
      "Email messages need a subject.",
      {"message_type": E(["inapp", "email"], "Delivery channel."), "from_admin_id": admin,
       "to_contact_id": S("Recipient contact ID."),
       "to_type": E(["user", "lead"], "Recipient role.", default="user"),
       "subject": S("Email subject."), "body": S("Message body (HTML allowed)."),
       "template": E(["plain", "personal"], "Email template style.", default="plain"),
       "create_conversation_without_contact_reply": B("Open a conversation immediately.", default=False)},
      ["message_type", "from_admin_id", "to_contact_id", "body"])

    t("REPLY_TO_CONVERSATION", "send",
      "Replies to a customer conversation as an admin; the customer sees it in the Messenger or by email.",
      {"conversation_id": S("Conversation ID."), "admin_id": admin, "body": S("Reply body (HTML)."),
       "attachment_urls": A({"type": "string", "format": "uri"}, "Files to attach by URL.", maxItems=10)},
      ["conversation_id", "admin_id", "body"])

    t("ADD_CONVERSATION_NOTE", "write",
      "Adds an internal note for teammates to a conversation; customers never see notes.",
      {"conversation_id": S("Conversation ID."), "admin_id": admin, "body": S("Note body.")},
      ["conversation_id", "admin_id", "body"])

    t("LIST_CONVERSATIONS", "read", "Lists conversations, most recently updated first.",
      {"per_page": LIM(20, 150), "starting_after": S("Cursor.")})

    t("GET_CONVERSATION", "read", "Retrieves a conversation with all its parts (messages, notes, assignments).",
      {"conversation_id": S("Conversation ID."), "plaintext": B("Return bodies as plain text.", default=False)},
      ["conversation_id"])

    t("SEARCH_CONVERSATIONS", "read",
      "Finds conversations with the search filter language, e.g. state = open AND admin_assignee_id = 123.",
      {"query": query, "pagination": pag}, ["query"])

    t("ASSIGN_CONVERSATION", "write", "Assigns a conversation to an admin or a team, optionally with a note.",
      {"conversation_id": S("Conversation ID."), "admin_id": admin, "assignee_id": S("Admin or team ID; '0' unassigns."),
       "assignee_type": E(["admin", "team"], "Assignee kind."), "body": S("Optional internal note.")},
      ["conversation_id", "admin_id", "assignee_id", "assignee_type"])

    t("CLOSE_CONVERSATION", "write", "Closes a conversation, optionally leaving a closing message.",
      {"conversation_id": S("Conversation ID."), "admin_id": admin, "body": S("Closing message.")},
      ["conversation_id", "admin_id"])

    t("SNOOZE_CONVERSATION", "write", "Snoozes a conversation until a given time, when it reopens automatically.",
      {"conversation_id": S("Conversation ID."), "admin_id": admin,
       "snoozed_until": I("Unix timestamp to reopen at.", minimum=0)},
      ["conversation_id", "admin_id", "snoozed_until"])

    t("CREATE_TICKET", "write",
      "Creates an Intercom ticket of a given ticket type for one or more contacts and fills in its attributes.",
      {"ticket_type_id": S("Ticket type ID."),
       "contacts": A(O({"id": S("Contact ID."), "email": EMAIL("Contact email.")}, "Contact reference."),
                     "Contacts on the ticket.", minItems=1),
       "ticket_attributes": MAP("Attribute values, e.g. {\"_default_title_\": \"...\", \"_default_description_\": \"...\"}."),
       "company_id": S("Company to link.")}, ["ticket_type_id", "contacts"])

    t("TAG_CONTACT", "write", "Applies an existing tag to a contact.",
      {"contact_id": S("Contact ID."), "tag_id": S("Tag ID.")}, ["contact_id", "tag_id"])

    t("LIST_ADMINS", "read", "Lists the workspace's admins (teammates) with IDs, emails and away status.")

    t("CREATE_ARTICLE", "write", "Writes a Help Center article, as a draft or published, inside a collection.",
      {"title": S("Title."), "body": S("HTML body."), "author_id": I("Admin author ID."),
       "state": E(["draft", "published"], "State.", default="draft"), "parent_id": I("Collection ID."),
       "description": S("Short description.")}, ["title", "author_id"], category="docs")

    t("SUBMIT_DATA_EVENT", "write",
      "Records a custom event (e.g. 'invited-teammate') on a contact's timeline, usable in segments and series.",
      {"event_name": S("Event name, past tense."), "created_at": I("Unix time of the event.", minimum=0),
       "user_id": S("Your user ID for the contact."), "email": EMAIL("Contact email."),
       "metadata": MAP("Up to 10 metadata key/values.")}, ["event_name", "created_at"])


@integration("freshdesk", "ticketing")
def _freshdesk(t):
    tid = I("Ticket ID.", minimum=1)
    status = E([2, 3, 4, 5], "Status: 2 Open, 3 Pending, 4 Resolved, 5 Closed.")
    prio = E([1, 2, 3, 4], "Priority: 1 Low, 2 Medium, 3 High, 4 Urgent.")
    custom = MAP("Custom field values keyed by their cf_ name.")

    t("CREATE_TICKET", "write",
      "Raises a Freshdesk ticket for a requester (by email or ID) with subject, HTML description, status, "
      "priority, source, group, agent, tags and custom fields.",
      {"email": EMAIL("Requester email; a contact is created if new."), "requester_id": I("Existing contact ID."),
       "name": S("Requester name."), "subject": S("Subject."), "description": S("HTML description."),
       "status": status, "priority": prio,
       "source": E([1, 2, 3, 7, 9, 10], "Source: 1 Email, 2 Portal, 3 Phone, 7 Chat, 9 Feedback widget, 10 Outbound email.",
                   default=2),
       "type": S("Ticket type, e.g. 'Question'."), "group_id": I("Group."), "responder_id": I("Agent."),
       "tags": STRS("Tags."), "cc_emails": EMAILS("CC addresses."), "due_by": DT("Resolution due time."),
       "custom_fields": custom}, ["subject", "description", "status", "priority"])

    t("UPDATE_TICKET", "write", "Updates ticket properties such as status, priority, agent, group or tags.",
      {"ticket_id": tid, "status": status, "priority": prio, "responder_id": I("Agent."), "group_id": I("Group."),
       "tags": STRS("Tags."), "type": S("Type."), "custom_fields": custom}, ["ticket_id"])

    t("GET_TICKET", "read", "Fetches a ticket, optionally with its conversations, requester, company and stats.",
      {"ticket_id": tid, "include": A(E(["conversations", "requester", "company", "stats"], "Embed."),
                                      "Related data to embed.")}, ["ticket_id"])

    t("LIST_TICKETS", "read",
      "Lists tickets using predefined filters (new and my open, watching, spam, deleted) or by requester, "
      "company and update time.",
      {"filter": E(["new_and_my_open", "watching", "spam", "deleted"], "Predefined filter."),
       "requester_email": EMAIL("Requester."), "company_id": I("Company."),
       "updated_since": DT("Only tickets updated after this time."),
       "order_by": E(["created_at", "due_by", "updated_at", "status"], "Sort field.", default="created_at"),
       "order_type": E(["asc", "desc"], "Sort order.", default="desc"),
       "per_page": LIM(30, 100), "page": I("Page.", default=1, minimum=1)})

    t("FILTER_TICKETS", "read",
      "Filters tickets with a query string, e.g. \"priority:3 AND status:2 AND created_at:>'2024-05-01'\". "
      "Returns 30 per page, at most 10 pages.",
      {"query": S("Filter query (wrapped in double quotes when sent)."), "page": I("Page.", default=1, minimum=1, maximum=10)},
      ["query"])

    t("DELETE_TICKET", "delete", "Moves a ticket to Trash, from where it can still be restored.",
      {"ticket_id": tid}, ["ticket_id"])

    t("REPLY_TO_TICKET", "send",
      "Emails a reply to the ticket's requester (also visible in the portal), with optional CC and BCC.",
      {"ticket_id": tid, "body": S("HTML reply."), "from_email": EMAIL("Support address to send from."),
       "cc_emails": EMAILS("CC."), "bcc_emails": EMAILS("BCC."), "user_id": I("Agent replying.")},
      ["ticket_id", "body"])

    t("ADD_NOTE", "write",
      "Adds a note to a ticket. Notes are private by default, and notify_emails can ping specific agents.",
      {"ticket_id": tid, "body": S("HTML note."), "private": B("Private note.", default=True),
       "notify_emails": EMAILS("Agents to notify.")}, ["ticket_id", "body"])

    t("FORWARD_TICKET", "send", "Forwards a ticket to external addresses, e.g. a vendor, with an optional message.",
      {"ticket_id": tid, "to_emails": EMAILS("Recipients.", minItems=1), "body": S("Message."),
       "cc_emails": EMAILS("CC."), "include_original_attachments": B("Include attachments.", default=True)},
      ["ticket_id", "to_emails"])

    t("CREATE_CONTACT", "write", "Adds a contact (customer) with email or phone and an optional company.",
      {"name": S("Name."), "email": EMAIL("Email."), "phone": S("Phone."), "mobile": S("Mobile."),
       "company_id": I("Company."), "job_title": S("Job title."), "tags": STRS("Tags."),
       "custom_fields": custom}, ["name"])

    t("LIST_CONTACTS", "read", "Lists contacts filtered by email, phone, company or state.",
      {"email": EMAIL("Email."), "phone": S("Phone."), "company_id": I("Company."),
       "state": E(["blocked", "deleted", "unverified", "verified"], "State."),
       "updated_since": DT("Updated after."), "per_page": LIM(30, 100), "page": I("Page.", default=1, minimum=1)})

    t("CREATE_COMPANY", "write", "Creates a company so contacts from its domains are grouped together.",
      {"name": S("Name."), "domains": STRS("Email domains."), "description": S("Description."),
       "note": S("Note."), "industry": S("Industry."), "account_tier": S("Account tier."),
       "renewal_date": DATE("Renewal date."), "custom_fields": custom}, ["name"])

    t("LIST_AGENTS", "read", "Lists agents, optionally by email or by full-time/occasional state.",
      {"email": EMAIL("Email."), "state": E(["fulltime", "occasional"], "Agent type."),
       "per_page": LIM(30, 100), "page": I("Page.", default=1, minimum=1)})

    t("LIST_GROUPS", "read", "Lists agent groups with their members and escalation settings.")

    t("CREATE_SOLUTION_ARTICLE", "write", "Adds a knowledge base (Solutions) article to a folder, as draft or published.",
      {"folder_id": I("Folder ID."), "title": S("Title."), "description": S("HTML content."),
       "status": E([1, 2], "1 draft, 2 published."), "tags": STRS("Tags."),
       "seo_data": O({"meta_title": S("SEO title."), "meta_description": S("SEO description.")}, "SEO metadata.")},
      ["folder_id", "title", "description", "status"], category="docs")

    t("CREATE_TIME_ENTRY", "write", "Logs time spent on a ticket, billable or not.",
      {"ticket_id": tid, "time_spent": S("Duration as hh:mm.", pattern=r"^\d{2}:\d{2}$"),
       "agent_id": I("Agent."), "note": S("Note."), "billable": B("Billable.", default=True),
       "executed_at": DT("When the work was done.")}, ["ticket_id"])

    t("EXECUTE_SCENARIO_AUTOMATION", "unknown",
      "Runs a scenario automation (a saved bundle of ticket actions set up by admins) on one or more tickets. "
      "Scenarios may change fields, add notes or send emails, so the effect depends on their configuration.",
      {"scenario_id": I("Scenario automation ID."), "ticket_ids": INTS("Tickets to run it on.", minItems=1)},
      ["scenario_id", "ticket_ids"])


# ===========================================================================
# Project management
# ===========================================================================

@integration("jira", "project_management")
def _jira(t):
    key = S("Issue key such as PROJ-123 (or the numeric issue ID).")
    acct = lambda d: S(d)
    prio = E(["Highest", "High", "Medium", "Low", "Lowest"], "Priority name; projects may use a custom priority scheme.")

    t("CREATE_ISSUE", "write",
      "Creates a Jira issue (story, task, bug, epic or sub-task) in a project with a summary, description and "
      "optional priority, assignee, labels, components, fix versions, sprint and estimates. "
      "Returns the new issue key, e.g. PROJ-123.",
      {
          "project_key": S("Project key, e.g. 'PROJ'.", pattern=r"^[A-Z][A-Z0-9_]+$"),
          "issue_type": S("Issue type name as configured in the project, e.g. Bug, Task, Story, Epic or Sub-task."),
          "summary": S("One-line summary.", maxLength=255),
          "description": S("Issue body. Plain text or Markdown; converted to Atlassian Document Format before sending."),
          "priority": prio,
          "assignee_account_id": acct("Atlassian account ID of the assignee (find it with JIRA_SEARCH_USERS). "
                                      "Omit for the project's default assignee."),
          "reporter_account_id": acct("Account ID of the reporter; defaults to the caller."),
          "labels": A({"type": "string", "pattern": r"^\S+$"}, "Labels (no spaces)."),
          "components": STRS("Component names."),
          "fix_versions": STRS("Fix version names."),
          "parent_key": S("Parent issue key: the epic for standard issues, or the parent for a sub-task."),
          "due_date": DATE("Due date."),
          "sprint_id": I("Sprint to put the issue in.", minimum=1),
          "story_points": N("Estimate stored in the project's story points field.", minimum=0),
          "time_tracking": O({
              "original_estimate": S("Jira duration, e.g. '3d 4h'."),
              "remaining_estimate": S("Remaining estimate, e.g. '2d'."),
          }, "Time tracking estimates."),
          "environment": S("Environment details (browser, OS, version) for bugs."),
          "affects_versions": STRS("Versions in which a bug was found."),
          "security_level": S("Security level name restricting who can see the issue."),
          "custom_fields": MAP("Other fields keyed by field ID, e.g. {\"customfield_10050\": {\"value\": \"EMEA\"}}. "
                               "Discover them with JIRA_GET_CREATE_FIELD_METADATA."),
      }, ["project_key", "issue_type", "summary"])

    t("GET_CREATE_FIELD_METADATA", "read",
      "Lists the fields on the create screen for a project and issue type, with required flags, allowed values "
      "and custom field IDs.",
      {"project_key": S("Project key."), "issue_type_id": S("Issue type ID.")}, ["project_key", "issue_type_id"])

    t("UPDATE_ISSUE", "write",
      "Edits fields of an existing issue identified by its issue key: summary, description, priority, labels, "
      "due date or custom fields. Status changes go through JIRA_TRANSITION_ISSUE.",
      {"issue_key": key, "summary": S("New summary."), "description": S("New description."), "priority": prio,
       "labels_add": STRS("Labels to add."), "labels_remove": STRS("Labels to remove."),
       "due_date": DATE("Due date."), "custom_fields": MAP("Custom field values by field ID."),
       "notify_users": B("Send the usual change notifications.", default=True)}, ["issue_key"])

    t("GET_ISSUE", "read",
      "Returns an issue by key with its fields, status and assignee, and optionally its changelog or rendered HTML.",
      {"issue_key": key, "fields": STRS("Fields to return, e.g. ['summary', 'status', 'assignee']."),
       "expand": A(E(["renderedFields", "changelog", "transitions", "names"], "Expansion."), "Extra data to expand.")},
      ["issue_key"])

    t("SEARCH_ISSUES", "read",
      "Finds issues with a JQL query, for example: project = PROJ AND status != Done AND assignee = currentUser() "
      "ORDER BY priority DESC.",
      {"jql": S("JQL query."), "fields": STRS("Fields to return."), "max_results": LIM(50, 100),
       "next_page_token": S("Token from the previous page.")}, ["jql"])

    t("GET_TRANSITIONS", "read",
      "Lists the workflow transitions currently available on an issue (e.g. 'Start Progress', 'Done') with their IDs.",
      {"issue_key": key}, ["issue_key"])

    t("TRANSITION_ISSUE", "write",
      "Moves an issue through its workflow using a transition ID, optionally setting a resolution and adding a comment.",
      {"issue_key": key, "transition_id": S("Transition ID from JIRA_GET_TRANSITIONS."),
       "resolution": S("Resolution name, e.g. 'Done', 'Won't Do' or 'Duplicate'."), "comment": S("Comment to add.")},
      ["issue_key", "transition_id"])

    t("ADD_COMMENT", "write",
      "Comments on an issue. Visibility can be limited to a project role or group, such as Developers.",
      {"issue_key": key, "body": S("Comment text (Markdown converted to ADF)."),
       "visibility": O({"type": E(["role", "group"], "Restriction type."), "value": S("Role or group name.")},
                       "Restrict who can see the comment.", req=["type", "value"])}, ["issue_key", "body"])

    t("ASSIGN_ISSUE", "write", "Assigns an issue to a person by account ID; pass an empty string to unassign it.",
      {"issue_key": key, "account_id": S("Assignee account ID.")}, ["issue_key", "account_id"])

    t("DELETE_ISSUE", "delete", "Deletes an issue permanently; sub-tasks must be deleted too when it has any.",
      {"issue_key": key, "delete_subtasks": B("Also delete sub-tasks.", default=False)}, ["issue_key"])

    t("LINK_ISSUES", "write", "Creates a link between two issues, such as 'PROJ-1 blocks PROJ-2' or 'relates to'.",
      {"link_type": S("Link type name, e.g. 'Blocks', 'Relates', 'Duplicate', 'Cloners'."),
       "inward_issue_key": S("Issue on the inward side, e.g. the blocked issue."),
       "outward_issue_key": S("Issue on the outward side, e.g. the blocker."),
       "comment": S("Optional comment.")}, ["link_type", "inward_issue_key", "outward_issue_key"])

    t("ADD_WORKLOG", "write",
      "Logs time spent on an issue, e.g. '2h 30m', with a start time and comment, and can adjust the remaining estimate.",
      {"issue_key": key, "time_spent": S("Time in Jira duration format."), "started": DT("When work started."),
       "comment": S("Work description."),
       "adjust_estimate": E(["auto", "leave", "new", "manual"], "How to change the remaining estimate.", default="auto"),
       "new_estimate": S("New remaining estimate when adjust_estimate is 'new'.")}, ["issue_key", "time_spent"])

    t("ADD_WATCHER", "write", "Adds a user as a watcher on an issue.",
      {"issue_key": key, "account_id": S("Account ID.")}, ["issue_key", "account_id"])

    t("LIST_PROJECTS", "read", "Lists projects visible to the user, optionally filtered by name or type.",
      {"query": S("Filter by key or name."), "type_key": E(["software", "business", "service_desk"], "Project type."),
       "max_results": LIM(50, 100), "start_at": I("Offset.", default=0, minimum=0)})

    t("SEARCH_USERS", "read", "Looks up Atlassian users by name or email fragment to get their account IDs.",
      {"query": S("Name or email fragment."), "max_results": LIM(20, 1000)}, ["query"])

    t("LIST_SPRINTS", "read", "Lists the sprints of a Scrum board, filtered by state (future, active, closed).",
      {"board_id": I("Board ID.", minimum=1),
       "state": A(E(["future", "active", "closed"], "Sprint state."), "States to include."),
       "max_results": LIM(50, 50)}, ["board_id"])

    t("CREATE_SPRINT", "write", "Creates a future sprint on a board with optional dates and goal.",
      {"board_id": I("Origin board ID.", minimum=1), "name": S("Sprint name."), "start_date": DT("Start."),
       "end_date": DT("End."), "goal": S("Sprint goal.")}, ["board_id", "name"])

    t("MOVE_ISSUES_TO_SPRINT", "write", "Moves up to 50 issues into a sprint.",
      {"sprint_id": I("Sprint ID.", minimum=1), "issue_keys": STRS("Issue keys.", minItems=1, maxItems=50)},
      ["sprint_id", "issue_keys"])

    t("NOTIFY_ISSUE", "send",
      "Emails a custom notification about an issue to chosen people: reporter, assignee, watchers, voters, "
      "specific users or groups.",
      {"issue_key": key, "subject": S("Email subject."), "text_body": S("Plain-text body."),
       "html_body": S("HTML body."),
       "to": O({"reporter": B("Notify the reporter."), "assignee": B("Notify the assignee."),
                "watchers": B("Notify watchers."), "voters": B("Notify voters."),
                "account_ids": STRS("Specific users."), "group_names": STRS("Groups.")}, "Recipients.")},
      ["issue_key", "to"])

    t("TRIGGER_AUTOMATION_WEBHOOK", "unknown",
      "Fires a Jira Automation rule that starts from an incoming-webhook trigger, passing issue keys and extra data. "
      "The actions that run (edits, transitions, emails, Slack posts) are whatever the rule defines.",
      {"webhook_url": URI("The rule's webhook URL."), "token": S("Value for the X-Automation-Webhook-Token header."),
       "issues": STRS("Issue keys to run the rule against."), "data": MAP("Custom data available as {{webhookData}}.")},
      ["webhook_url"])


@integration("linear", "project_management")
def _linear(t):
    issue = S("Issue UUID or identifier such as ENG-123.")
    prio = E([0, 1, 2, 3, 4], "Priority: 0 none, 1 urgent, 2 high, 3 medium, 4 low.")

    t("CREATE_ISSUE", "write",
      "Opens a Linear issue in a team with a Markdown description, priority, labels, assignee, project, cycle, "
      "estimate and optional parent for sub-issues.",
      {"team_id": S("Team ID."), "title": S("Issue title."), "description": S("Markdown description."),
       "priority": prio, "assignee_id": S("User ID."), "state_id": S("Workflow state ID."),
       "label_ids": STRS("Label IDs."), "project_id": S("Project ID."), "cycle_id": S("Cycle ID."),
       "estimate": I("Estimate points.", minimum=0), "due_date": DATE("Due date."),
       "parent_id": S("Parent issue ID for sub-issues.")}, ["team_id", "title"])

    t("UPDATE_ISSUE", "write", "Changes an issue's title, description, state, priority, assignee, labels, project or cycle.",
      {"issue_id": issue, "title": S("Title."), "description": S("Description."), "priority": prio,
       "state_id": S("New workflow state."), "assignee_id": S("Assignee."), "label_ids": STRS("Replaces labels."),
       "project_id": S("Project."), "cycle_id": S("Cycle."), "estimate": I("Estimate.", minimum=0),
       "due_date": DATE("Due date.")}, ["issue_id"])

    t("GET_ISSUE", "read", "Loads a single issue with state, assignee, labels and optionally its comments.",
      {"issue_id": issue, "include_comments": B("Include comments.", default=False)}, ["issue_id"])

    t("LIST_ISSUES", "read",
      "Lists issues using structured filters such as team, state type, assignee, label or project, ordered by last update.",
      {"team_id": S("Team ID."),
       "state_type": E(["triage", "backlog", "unstarted", "started", "completed", "canceled"], "Workflow state category."),
       "assignee_id": S("Assignee user ID, or 'me'."), "label_name": S("Label name."), "project_id": S("Project ID."),
       "first": LIM(50, 250), "after": S("Cursor."), "include_archived": B("Include archived issues.", default=False)})

    t("SEARCH_ISSUES", "read", "Full-text search across issue titles, descriptions and comments.",
      {"query": S("Search text."), "team_id": S("Limit to a team."), "first": LIM(25, 100),
       "include_archived": B("Include archived.", default=False)}, ["query"])

    t("ARCHIVE_ISSUE", "delete", "Archives an issue, or moves it to the trash when trash is true.",
      {"issue_id": issue, "trash": B("Trash instead of archive.", default=False)}, ["issue_id"])

    t("CREATE_COMMENT", "write", "Comments on an issue in Markdown, optionally as a reply in an existing comment thread.",
      {"issue_id": issue, "body": S("Markdown body."), "parent_id": S("Parent comment ID for a threaded reply.")},
      ["issue_id", "body"])

    t("LIST_TEAMS", "read", "Lists the workspace's teams with IDs and issue key prefixes.")

    t("LIST_WORKFLOW_STATES", "read",
      "Returns each team's workflow states (Triage, Backlog, Todo, In Progress, Done...) with IDs used to move issues.",
      {"team_id": S("Only this team.")})

    t("LIST_CYCLES", "read", "Lists a team's cycles: the active one, upcoming ones, or completed ones.",
      {"team_id": S("Team ID."), "which": E(["active", "upcoming", "completed", "all"], "Cycle selection.", default="all")},
      ["team_id"])

    t("LIST_PROJECTS", "read", "Lists projects with their state, lead, target date and progress.",
      {"state": E(["planned", "started", "paused", "completed", "canceled"], "Project state."),
       "first": LIM(50, 250), "after": S("Cursor.")})

    t("CREATE_PROJECT", "write", "Creates a project shared by one or more teams, with lead and target date.",
      {"name": S("Project name."), "team_ids": STRS("Teams.", minItems=1), "description": S("Summary."),
       "lead_id": S("Lead user ID."), "start_date": DATE("Start date."), "target_date": DATE("Target date.")},
      ["name", "team_ids"])

    t("POST_PROJECT_UPDATE", "write",
      "Posts a project update with a health rating (onTrack, atRisk, offTrack) and a Markdown summary.",
      {"project_id": S("Project ID."), "body": S("Markdown update."),
       "health": E(["onTrack", "atRisk", "offTrack"], "Project health.")}, ["project_id", "body"])

    t("CREATE_LABEL", "write", "Creates an issue label for a team, or for the whole workspace when no team is given.",
      {"name": S("Label name."), "color": S("Hex color, e.g. '#5e6ad2'.", pattern=r"^#[0-9a-fA-F]{6}$"),
       "team_id": S("Team ID."), "description": S("Description."), "parent_id": S("Label group ID.")}, ["name"])

    t("LIST_USERS", "read", "Lists workspace members with IDs, names and emails.",
      {"include_disabled": B("Include deactivated users.", default=False)})

    t("ATTACH_LINK", "write",
      "Attaches a URL (pull request, Sentry event, Figma file, doc) to an issue as a rich attachment.",
      {"issue_id": issue, "url": URI("Link."), "title": S("Attachment title."), "subtitle": S("Subtitle.")},
      ["issue_id", "url", "title"])

    t("CREATE_ISSUE_RELATION", "write", "Relates two issues as blocking, duplicate or simply related.",
      {"issue_id": issue, "related_issue_id": S("Other issue."),
       "type": E(["blocks", "duplicate", "related"], "Relation; 'blocks' means issue_id blocks the other.")},
      ["issue_id", "related_issue_id", "type"])

    t("RUN_GRAPHQL", "unknown",
      "Executes a raw query or mutation against Linear's GraphQL API. Queries only read, but mutations can change "
      "anything the token allows, so the effect depends on the document sent.",
      {"query": S("GraphQL document."), "variables": MAP("Variables.")}, ["query"])


@integration("asana", "project_management")
def _asana(t):
    gid = lambda d: S(d, pattern=r"^\d+$")
    task = gid("Task GID.")

    t("CREATE_TASK", "write",
      "Creates a task in an Asana workspace, optionally inside projects and sections. Supports rich-text html_notes, "
      "due dates or times, followers, tags and custom field values keyed by field GID.",
      {"workspace_gid": gid("Workspace GID (needed when no project is given)."), "name": S("Task name."),
       "notes": S("Plain-text description."), "html_notes": S("Rich description wrapped in <body>...</body>."),
       "assignee": S("User GID, email or 'me'."), "due_on": DATE("Due date."), "due_at": DT("Due date and time."),
       "start_on": DATE("Start date."), "projects": STRS("Project GIDs."),
       "memberships": A(O({"project": gid("Project GID."), "section": gid("Section GID.")},
                          "Project placement.", req=["project"]), "Project/section placements."),
       "followers": STRS("Follower user GIDs or emails."), "tags": STRS("Tag GIDs."),
       "parent": gid("Parent task, making this a subtask."),
       "custom_fields": MAP("Custom field values keyed by custom field GID.")}, ["name"])

    t("UPDATE_TASK", "write", "Edits a task's name, notes, assignee, dates, completion or custom fields.",
      {"task_gid": task, "name": S("Name."), "notes": S("Notes."), "assignee": S("Assignee."),
       "due_on": DATE("Due date."), "due_at": DT("Due time."), "completed": B("Completion state."),
       "custom_fields": MAP("Custom field values.")}, ["task_gid"])

    t("COMPLETE_TASK", "write", "Marks a task complete, or reopens it with completed set to false.",
      {"task_gid": task, "completed": B("Completion state.", default=True)}, ["task_gid"])

    t("GET_TASK", "read", "Retrieves a task with its assignee, dates, projects, custom fields and followers.",
      {"task_gid": task, "opt_fields": STRS("Fields to include, e.g. ['name', 'due_on', 'assignee.name'].")},
      ["task_gid"])

    t("DELETE_TASK", "delete", "Deletes a task; it stays in the trash for 30 days.", {"task_gid": task}, ["task_gid"])

    t("SEARCH_TASKS", "read",
      "Advanced task search in a workspace (premium): text plus filters on assignee, projects, completion and "
      "dates, with sorting.",
      {"workspace_gid": gid("Workspace GID."), "text": S("Text to match."), "assignee_any": STRS("Assignees."),
       "projects_any": STRS("Projects."), "completed": B("Completion filter."),
       "due_on_before": DATE("Due before."), "due_on_after": DATE("Due after."),
       "modified_at_after": DT("Modified after."),
       "sort_by": E(["due_date", "created_at", "completed_at", "likes", "modified_at"], "Sort.", default="modified_at"),
       "limit": LIM(20, 100)}, ["workspace_gid"])

    t("GET_TASKS_FOR_PROJECT", "read", "Returns the tasks in a project, optionally only incomplete ones.",
      {"project_gid": gid("Project GID."),
       "completed_since": S("Only tasks incomplete or completed after this time; 'now' returns incomplete tasks only."),
       "limit": LIM(50, 100), "offset": S("Page offset token.")}, ["project_gid"])

    t("ADD_COMMENT", "write", "Adds a comment (story) to a task; @-mentions in html_text notify those people.",
      {"task_gid": task, "text": S("Plain comment."), "html_text": S("Rich comment."),
       "is_pinned": B("Pin the comment.", default=False)}, ["task_gid"])

    t("CREATE_SUBTASK", "write", "Adds a subtask under an existing task.",
      {"parent_task_gid": task, "name": S("Name."), "assignee": S("Assignee."), "due_on": DATE("Due date."),
       "notes": S("Notes.")}, ["parent_task_gid", "name"])

    t("ADD_TASK_TO_PROJECT", "write", "Adds a task to a project (multi-homing), optionally in a specific section.",
      {"task_gid": task, "project_gid": gid("Project."), "section_gid": gid("Section."),
       "insert_before": gid("Insert before this task."), "insert_after": gid("Insert after this task.")},
      ["task_gid", "project_gid"])

    t("LIST_PROJECTS", "read", "Lists projects in a workspace or team.",
      {"workspace_gid": gid("Workspace."), "team_gid": gid("Team."),
       "archived": B("Archived projects only.", default=False), "limit": LIM(50, 100)})

    t("CREATE_PROJECT", "write", "Creates a project in a team with a default view, dates and privacy setting.",
      {"workspace_gid": gid("Workspace."), "team_gid": gid("Team (required in organizations)."), "name": S("Name."),
       "notes": S("Description."), "default_view": E(["list", "board", "calendar", "timeline"], "View.", default="list"),
       "due_on": DATE("Due date."), "start_on": DATE("Start date."),
       "privacy_setting": E(["public_to_workspace", "private_to_team", "private"], "Privacy."),
       "owner": S("Owner user GID.")}, ["workspace_gid", "name"])

    t("LIST_SECTIONS", "read", "Lists the sections (columns on a board) of a project.",
      {"project_gid": gid("Project.")}, ["project_gid"])

    t("CREATE_SECTION", "write", "Adds a section (a list heading or board column) to an Asana project.",
      {"project_gid": gid("Project."), "name": S("Section name."), "insert_before": gid("Before section."),
       "insert_after": gid("After section.")}, ["project_gid", "name"])

    t("LIST_WORKSPACES", "read", "Lists the workspaces and organizations the user belongs to.")

    t("LIST_USERS", "read", "Lists the users of a workspace with GIDs, names and emails.",
      {"workspace_gid": gid("Workspace.")}, ["workspace_gid"])

    t("CREATE_STATUS_UPDATE", "write",
      "Posts a color-coded status update (on track, at risk, off track, on hold, complete) on a project, portfolio or goal.",
      {"parent_gid": gid("Project, portfolio or goal GID."),
       "status_type": E(["on_track", "at_risk", "off_track", "on_hold", "complete"], "Status."),
       "title": S("Title."), "text": S("Update text.")}, ["parent_gid", "status_type", "text"])

    t("ADD_FOLLOWERS", "write", "Adds followers (collaborators) to a task so they get its notifications.",
      {"task_gid": task, "followers": STRS("User GIDs or emails.", minItems=1)}, ["task_gid", "followers"])

    t("SUBMIT_BATCH_REQUEST", "unknown",
      "Runs up to 10 Asana API actions in a single batch call. Each action can read, create, modify or delete, "
      "so the effect depends on what is included.",
      {"actions": A(O({"method": E(["get", "post", "put", "delete"], "HTTP method."),
                       "relative_path": S("Path such as '/tasks/123'."), "data": MAP("Request body data."),
                       "options": MAP("Options such as fields or limit.")},
                      "One action.", req=["method", "relative_path"]), "Actions.", minItems=1, maxItems=10)},
      ["actions"])


@integration("trello", "project_management")
def _trello(t):
    tid = lambda d: S(d, pattern=r"^[0-9a-fA-F]{24}$")
    card = tid("Card ID.")
    pos = {"type": ["string", "number"], "description": "'top', 'bottom' or a positive number."}

    t("CREATE_CARD", "write",
      "Adds a card to a Trello list with an optional Markdown description, start and due dates, members, labels "
      "and position. url_source attaches a link when the card is created.",
      {"list_id": tid("List to add the card to."), "name": S("Card title."), "desc": S("Markdown description."),
       "pos": pos, "due": DT("Due date."), "start": DT("Start date."),
       "member_ids": STRS("Member IDs to assign."), "label_ids": STRS("Label IDs."),
       "url_source": URI("URL to attach.")}, ["list_id"])

    t("UPDATE_CARD", "write",
      "Updates a card: rename it, edit the description or dates, mark the due date complete, or move it to "
      "another list or board.",
      {"card_id": card, "name": S("Name."), "desc": S("Description."), "list_id": tid("Move to this list."),
       "board_id": tid("Move to this board."), "pos": pos, "due": DT("Due."),
       "due_complete": B("Due date completed.")}, ["card_id"])

    t("GET_CARD", "read", "Fetches a card, optionally with its checklists, attachments, members and recent actions.",
      {"card_id": card, "include": A(E(["checklists", "attachments", "members", "actions"], "Nested data."),
                                     "Extra data.")}, ["card_id"])

    t("ARCHIVE_CARD", "delete", "Archives (closes) a card so it leaves the board view.",
      {"card_id": card}, ["card_id"])

    t("DELETE_CARD", "delete", "Permanently deletes a card with its comments and attachments; there is no undo.",
      {"card_id": card}, ["card_id"])

    t("SEARCH", "read",
      "Searches cards and boards across the member's workspaces with Trello search operators like @me, "
      "label:red, due:week or is:open.",
      {"query": S("Search text with operators."),
       "model_types": A(E(["cards", "boards", "organizations", "members", "actions"], "Model."), "What to search."),
       "board_ids": STRS("Restrict to these boards."), "cards_limit": LIM(10, 1000),
       "partial": B("Match word prefixes.", default=False)}, ["query"])

    t("LIST_BOARDS", "read", "Lists the boards of the authenticated member.",
      {"filter": E(["all", "open", "closed", "starred", "members", "organization", "public"], "Which boards.",
                   default="open")})

    t("GET_BOARD_LISTS", "read", "Returns the lists (columns) on a board in order.",
      {"board_id": tid("Board ID."), "filter": E(["open", "closed", "all"], "Which lists.", default="open")},
      ["board_id"])

    t("GET_LIST_CARDS", "read", "Returns the open cards in a Trello list in their board order.", {"list_id": tid("List ID.")}, ["list_id"])

    t("CREATE_BOARD", "write", "Creates a board, with or without the default To Do / Doing / Done lists.",
      {"name": S("Board name."), "desc": S("Description."), "workspace_id": tid("Workspace (organization) ID."),
       "default_lists": B("Create default lists.", default=True),
       "permission_level": E(["private", "org", "public"], "Visibility.", default="private"),
       "background": S("Background color name, e.g. 'blue'.")}, ["name"])

    t("CREATE_LIST", "write", "Adds a list (column) to a Trello board at the chosen position.",
      {"board_id": tid("Board."), "name": S("List name."), "pos": pos}, ["board_id", "name"])

    t("ADD_COMMENT", "write", "Adds a comment to a card; @mentions notify those members.",
      {"card_id": card, "text": S("Comment text.")}, ["card_id", "text"])

    t("ADD_LABEL_TO_CARD", "write", "Applies an existing board label to a card.",
      {"card_id": card, "label_id": tid("Label ID.")}, ["card_id", "label_id"])

    t("CREATE_CHECKLIST", "write", "Adds a checklist with items to a card.",
      {"card_id": card, "name": S("Checklist name."), "items": STRS("Item names, in order.")}, ["card_id", "name"])

    t("UPDATE_CHECKLIST_ITEM", "write", "Ticks, unticks or renames a checklist item on a card.",
      {"card_id": card, "check_item_id": tid("Checklist item ID."),
       "state": E(["complete", "incomplete"], "Item state."), "name": S("New name.")}, ["card_id", "check_item_id"])

    t("ADD_MEMBER_TO_CARD", "write", "Assigns a board member to a card.",
      {"card_id": card, "member_id": tid("Member ID.")}, ["card_id", "member_id"])

    t("ADD_ATTACHMENT", "write", "Attaches a link or file reference to a card.",
      {"card_id": card, "url": URI("URL to attach."), "name": S("Display name."), "mime_type": S("MIME type."),
       "set_cover": B("Use as the card cover.", default=False)}, ["card_id", "url"])

    t("INVITE_TO_BOARD", "send",
      "Invites someone to a board by email; Trello sends the invitation and creates an account for them if needed.",
      {"board_id": tid("Board."), "email": EMAIL("Invitee email."), "full_name": S("Invitee name."),
       "type": E(["normal", "admin", "observer"], "Board role.", default="normal")}, ["board_id", "email"])


# ===========================================================================
# Code hosting
# ===========================================================================

@integration("github", "code_hosting")
def _github(t):
    owner = S("Account or organization that owns the repository.")
    repo = S("Repository name without the owner.")
    num = lambda d: I(d, minimum=1)
    pp = LIM(30, 100, "Results per page.")
    page = I("Page number.", default=1, minimum=1)
    base = {"owner": owner, "repo": repo}

    def r(extra):
        d = dict(base)
        d.update(extra)
        return d

    t("CREATE_ISSUE", "write", "Opens an issue in a repository with a Markdown body, assignees, labels and milestone.",
      r({"title": S("Issue title."), "body": S("Markdown body."), "assignees": STRS("Logins to assign."),
         "labels": STRS("Label names."), "milestone": num("Milestone number.")}),
      ["owner", "repo", "title"])

    t("UPDATE_ISSUE", "write", "Edits an issue or closes/reopens it with a state reason.",
      r({"issue_number": num("Issue number."), "title": S("Title."), "body": S("Body."),
         "state": E(["open", "closed"], "State."),
         "state_reason": E(["completed", "not_planned", "reopened"], "Why the state changed."),
         "assignees": STRS("Replaces assignees."), "labels": STRS("Replaces labels.")}),
      ["owner", "repo", "issue_number"])

    t("GET_ISSUE", "read", "Fetches an issue (or pull request) by number.",
      r({"issue_number": num("Issue number.")}), ["owner", "repo", "issue_number"])

    t("LIST_ISSUES", "read",
      "Lists a repository's issues filtered by state, labels, assignee or creator. Pull requests also appear and "
      "carry a pull_request key.",
      r({"state": E(["open", "closed", "all"], "State.", default="open"),
         "labels": S("Comma-separated label names."), "assignee": S("Login, 'none' or '*'."),
         "creator": S("Creator login."), "since": DT("Updated since."),
         "sort": E(["created", "updated", "comments"], "Sort.", default="created"),
         "direction": E(["asc", "desc"], "Direction.", default="desc"), "per_page": pp, "page": page}),
      ["owner", "repo"])

    t("SEARCH_ISSUES_AND_PULL_REQUESTS", "read",
      "Searches issues and pull requests across GitHub with qualifiers, "
      "e.g. 'repo:octo/app is:pr is:open review-requested:@me' or 'org:acme label:bug created:>2024-01-01'.",
      {"q": S("Search query with qualifiers."),
       "sort": E(["comments", "reactions", "created", "updated", "interactions"], "Sort field."),
       "order": E(["asc", "desc"], "Order.", default="desc"), "per_page": pp, "page": page}, ["q"])

    t("CREATE_ISSUE_COMMENT", "write",
      "Comments on the conversation of an issue or pull request (not a line-level review comment).",
      r({"issue_number": num("Issue or PR number."), "body": S("Markdown comment.")}),
      ["owner", "repo", "issue_number", "body"])

    t("CREATE_PULL_REQUEST", "write",
      "Opens a pull request from a head branch into a base branch. Use 'user:branch' for heads in forks; "
      "draft=true opens it as a draft.",
      r({"title": S("PR title."), "head": S("Branch with the changes."), "base": S("Branch to merge into."),
         "body": S("Markdown description."), "draft": B("Open as draft.", default=False),
         "maintainer_can_modify": B("Allow maintainers to push to the head branch.", default=True)}),
      ["owner", "repo", "title", "head", "base"])

    t("LIST_PULL_REQUESTS", "read", "Lists pull requests by state, head or base branch.",
      r({"state": E(["open", "closed", "all"], "State.", default="open"), "head": S("Filter by 'user:branch'."),
         "base": S("Filter by base branch."),
         "sort": E(["created", "updated", "popularity", "long-running"], "Sort.", default="created"),
         "direction": E(["asc", "desc"], "Direction."), "per_page": pp, "page": page}), ["owner", "repo"])

    t("GET_PULL_REQUEST", "read", "Gets a pull request with its branches, mergeability, review state and stats.",
      r({"pull_number": num("PR number.")}), ["owner", "repo", "pull_number"])

    t("LIST_PULL_REQUEST_FILES", "read",
      "Lists the files changed in a pull request with additions, deletions and patch hunks (up to 3,000 files).",
      r({"pull_number": num("PR number."), "per_page": pp, "page": page}), ["owner", "repo", "pull_number"])

    t("CREATE_PULL_REQUEST_REVIEW", "write",
      "Submits a review on a pull request (APPROVE, REQUEST_CHANGES or COMMENT) with an overall body and "
      "optional comments anchored to lines of the diff.",
      r({"pull_number": num("PR number."),
         "event": E(["APPROVE", "REQUEST_CHANGES", "COMMENT"], "Review verdict."),
         "body": S("Overall review comment."), "commit_id": S("Commit SHA the review applies to."),
         "comments": A(O({"path": S("File path."), "line": I("Line in the diff.", minimum=1),
                          "side": E(["LEFT", "RIGHT"], "Diff side.", default="RIGHT"),
                          "start_line": I("First line for multi-line comments.", minimum=1),
                          "body": S("Comment text.")}, "A line comment.", req=["path", "body"]),
                       "Line comments.")}),
      ["owner", "repo", "pull_number", "event"])

    t("REQUEST_REVIEWERS", "write", "Requests reviews on a pull request from users or teams.",
      r({"pull_number": num("PR number."), "reviewers": STRS("User logins."),
         "team_reviewers": STRS("Team slugs.")}), ["owner", "repo", "pull_number"])

    t("MERGE_PULL_REQUEST", "write",
      "Merges a pull request with a merge commit, squash or rebase. Pass the head SHA you reviewed to avoid "
      "merging commits you haven't seen.",
      r({"pull_number": num("PR number."),
         "merge_method": E(["merge", "squash", "rebase"], "Merge method.", default="merge"),
         "commit_title": S("Title for the merge commit."), "commit_message": S("Extra detail for the commit."),
         "sha": S("Expected head SHA.")}), ["owner", "repo", "pull_number"])

    t("GET_FILE_CONTENTS", "read",
      "Reads a file, or lists a directory, at a branch, tag or commit. File content comes back base64 encoded "
      "with its blob SHA.",
      r({"path": S("Path in the repository."), "ref": S("Branch, tag or SHA; default branch if omitted.")}),
      ["owner", "repo", "path"])

    t("CREATE_OR_UPDATE_FILE", "write",
      "Commits a single file to a branch, creating it, or updating it when you pass the current blob SHA.",
      r({"path": S("File path."), "message": S("Commit message."),
         "content": S("New content, base64 encoded.", contentEncoding="base64"),
         "sha": S("Blob SHA of the file being replaced (required for updates)."), "branch": S("Target branch."),
         "committer": O({"name": S("Name."), "email": EMAIL("Email.")}, "Committer identity.",
                        req=["name", "email"])}),
      ["owner", "repo", "path", "message", "content"])

    t("DELETE_FILE", "delete", "Deletes a file from a branch with a commit.",
      r({"path": S("File path."), "message": S("Commit message."), "sha": S("Blob SHA of the file."),
         "branch": S("Branch.")}), ["owner", "repo", "path", "message", "sha"])

    t("CREATE_BRANCH", "write", "Creates a branch pointing at a commit SHA.",
      r({"branch": S("New branch name."), "from_sha": S("Commit SHA to branch from.")}),
      ["owner", "repo", "branch", "from_sha"])

    t("DELETE_BRANCH", "delete", "Deletes a branch ref from the repository.",
      r({"branch": S("Branch name.")}), ["owner", "repo", "branch"])

    t("LIST_COMMITS", "read", "Lists commits on a branch, optionally touching a path, by an author or in a date range.",
      r({"sha": S("Branch or SHA to start from."), "path": S("Only commits touching this path."),
         "author": S("Login or email."), "since": DT("After."), "until": DT("Before."), "per_page": pp,
         "page": page}), ["owner", "repo"])

    t("CREATE_RELEASE", "write",
      "Publishes a release for a tag (created from target_commitish if needed), with notes that GitHub can generate.",
      r({"tag_name": S("Tag, e.g. 'v1.4.0'."), "target_commitish": S("Branch or SHA for a new tag."),
         "name": S("Release title."), "body": S("Release notes."), "draft": B("Draft.", default=False),
         "prerelease": B("Pre-release.", default=False),
         "generate_release_notes": B("Auto-generate notes.", default=False),
         "make_latest": E(["true", "false", "legacy"], "Mark as latest.", default="true")}),
      ["owner", "repo", "tag_name"])

    t("CREATE_REPOSITORY", "write", "Creates a repository for the user, or in an organization when org is set.",
      {"name": S("Repository name."), "org": S("Organization login."), "description": S("Description."),
       "private": B("Private repository.", default=False), "auto_init": B("Create an initial commit with README.", default=False),
       "gitignore_template": S("e.g. 'Python'."), "license_template": S("e.g. 'mit'."),
       "has_issues": B("Enable issues.", default=True), "has_wiki": B("Enable wiki.", default=True)}, ["name"])

    t("SEARCH_CODE", "read",
      "Searches code on default branches, e.g. 'useEffect repo:facebook/react language:TypeScript'.",
      {"q": S("Code search query."), "per_page": pp, "page": page}, ["q"])

    t("LIST_WORKFLOW_RUNS", "read",
      "Lists GitHub Actions runs for a repo, filterable by workflow file, branch, event and status.",
      r({"workflow_id": S("Workflow file name such as 'ci.yml' or numeric ID."), "branch": S("Branch."),
         "event": S("Triggering event, e.g. 'push'."),
         "status": E(["queued", "in_progress", "completed", "success", "failure", "cancelled"], "Status."),
         "per_page": pp}), ["owner", "repo"])

    t("TRIGGER_WORKFLOW_DISPATCH", "unknown",
      "Triggers a workflow_dispatch event for a GitHub Actions workflow on a ref, with inputs. What the workflow "
      "does (deploy, publish, run migrations) depends on its YAML.",
      r({"workflow_id": S("Workflow file name or ID."), "ref": S("Branch or tag."),
         "inputs": MAP("Workflow inputs.", "string")}), ["owner", "repo", "workflow_id", "ref"])

    t("ADD_COLLABORATOR", "send",
      "Invites a user to collaborate on a repository with a permission level; GitHub emails an invitation they must accept.",
      r({"username": S("Invitee login."),
         "permission": E(["pull", "triage", "push", "maintain", "admin"], "Permission.", default="push")}),
      ["owner", "repo", "username"])


@integration("gitlab", "code_hosting")
def _gitlab(t):
    proj = S("Project ID or URL-encoded path, e.g. '42' or 'group%2Fapp'.")
    iid = lambda d: I(d, minimum=1)
    pp = LIM(20, 100, "Results per page.")

    t("CREATE_ISSUE", "write",
      "Creates a GitLab issue with description, labels, assignees, milestone, due date, weight and confidentiality.",
      {"project_id": proj, "title": S("Title."), "description": S("Markdown description."),
       "labels": S("Comma-separated labels."), "assignee_ids": INTS("User IDs."), "milestone_id": iid("Milestone."),
       "due_date": DATE("Due date."), "confidential": B("Confidential issue.", default=False),
       "weight": I("Weight.", minimum=0),
       "issue_type": E(["issue", "incident", "test_case", "task"], "Type.", default="issue"),
       "epic_id": iid("Epic (Premium).")}, ["project_id", "title"])

    t("UPDATE_ISSUE", "write", "Edits an issue, adds or removes labels, or closes/reopens it with state_event.",
      {"project_id": proj, "issue_iid": iid("Issue IID (number within the project)."), "title": S("Title."),
       "description": S("Description."), "state_event": E(["close", "reopen"], "State change."),
       "add_labels": S("Labels to add."), "remove_labels": S("Labels to remove."),
       "assignee_ids": INTS("Assignees."), "due_date": DATE("Due date.")}, ["project_id", "issue_iid"])

    t("GET_ISSUE", "read", "Gets a GitLab issue by its project-level IID, with labels, assignees, milestone and state.",
      {"project_id": proj, "issue_iid": iid("Issue IID.")}, ["project_id", "issue_iid"])

    t("LIST_ISSUES", "read",
      "Lists issues of a project, or of everything the user can see when no project is given, with filters.",
      {"project_id": proj, "state": E(["opened", "closed", "all"], "State.", default="opened"),
       "labels": S("Comma-separated labels."), "search": S("Text in title or description."),
       "scope": E(["created_by_me", "assigned_to_me", "all"], "Scope.", default="all"),
       "order_by": E(["created_at", "updated_at", "priority", "due_date"], "Order.", default="created_at"),
       "sort": E(["asc", "desc"], "Direction.", default="desc"), "per_page": pp})

    t("CREATE_MERGE_REQUEST", "write",
      "Opens a merge request from a source to a target branch with reviewers and labels. Flags can squash or "
      "delete the source branch on merge; prefix the title with 'Draft:' for a draft.",
      {"project_id": proj, "source_branch": S("Source branch."), "target_branch": S("Target branch."),
       "title": S("Title."), "description": S("Description."), "assignee_ids": INTS("Assignees."),
       "reviewer_ids": INTS("Reviewers."), "labels": S("Comma-separated labels."),
       "remove_source_branch": B("Delete source branch after merge.", default=False),
       "squash": B("Squash commits on merge.", default=False),
       "target_project_id": iid("Target project for fork MRs.")},
      ["project_id", "source_branch", "target_branch", "title"])

    t("LIST_MERGE_REQUESTS", "read", "Lists merge requests by state, author, reviewer or target branch.",
      {"project_id": proj, "state": E(["opened", "closed", "locked", "merged", "all"], "State.", default="opened"),
       "author_username": S("Author."), "reviewer_username": S("Reviewer."), "target_branch": S("Target branch."),
       "per_page": pp}, ["project_id"])

    t("GET_MERGE_REQUEST_DIFFS", "read", "Returns the changed files and diff hunks of a merge request.",
      {"project_id": proj, "merge_request_iid": iid("MR IID."), "page": I("Page.", default=1, minimum=1),
       "per_page": pp}, ["project_id", "merge_request_iid"])

    t("ACCEPT_MERGE_REQUEST", "write", "Merges a merge request now, or sets it to merge once its pipeline succeeds.",
      {"project_id": proj, "merge_request_iid": iid("MR IID."),
       "merge_when_pipeline_succeeds": B("Auto-merge after a green pipeline.", default=False),
       "squash": B("Squash.", default=False), "should_remove_source_branch": B("Delete source branch."),
       "merge_commit_message": S("Merge commit message."), "sha": S("Expected head SHA.")},
      ["project_id", "merge_request_iid"])

    t("CREATE_NOTE", "write",
      "Adds a comment (note) to an issue or merge request. Quick actions such as /label ~bug in the body are executed.",
      {"project_id": proj, "noteable_type": E(["issue", "merge_request"], "What to comment on."),
       "noteable_iid": iid("Issue or MR IID."), "body": S("Markdown body."),
       "internal": B("Internal note visible to members only.", default=False)},
      ["project_id", "noteable_type", "noteable_iid", "body"])

    t("TRIGGER_PIPELINE", "unknown",
      "Creates a CI/CD pipeline for a branch or tag with optional variables. The jobs that run (builds, "
      "deployments, releases) are defined in .gitlab-ci.yml.",
      {"project_id": proj, "ref": S("Branch or tag."),
       "variables": A(O({"key": S("Variable name."), "value": S("Value."),
                         "variable_type": E(["env_var", "file"], "Type.", default="env_var")},
                        "Pipeline variable.", req=["key", "value"]), "Variables.")}, ["project_id", "ref"])

    t("LIST_PIPELINES", "read", "Lists pipelines filtered by status, ref or update time.",
      {"project_id": proj,
       "status": E(["created", "pending", "running", "success", "failed", "canceled", "skipped", "manual", "scheduled"],
                   "Status."), "ref": S("Branch or tag."), "updated_after": DT("Updated after."), "per_page": pp},
      ["project_id"])

    t("CANCEL_PIPELINE", "write", "Cancels the running jobs of a pipeline.",
      {"project_id": proj, "pipeline_id": iid("Pipeline ID.")}, ["project_id", "pipeline_id"])

    t("GET_JOB_LOG", "read", "Fetches the raw log output of a CI job, handy for diagnosing a failed pipeline.",
      {"project_id": proj, "job_id": iid("Job ID.")}, ["project_id", "job_id"])

    t("GET_FILE", "read", "Reads a file from the repository at a branch, tag or commit.",
      {"project_id": proj, "file_path": S("URL-encoded path, e.g. 'src%2Fmain.go'."), "ref": S("Branch, tag or SHA.")},
      ["project_id", "file_path", "ref"])

    t("CREATE_COMMIT", "write",
      "Creates one commit with several file actions (create, update, delete, move, chmod) on a branch, "
      "optionally starting a new branch from start_branch.",
      {"project_id": proj, "branch": S("Target branch."), "commit_message": S("Message."),
       "start_branch": S("Create branch from this one."),
       "actions": A(O({"action": E(["create", "delete", "move", "update", "chmod"], "Action."),
                       "file_path": S("Path."), "previous_path": S("Old path for moves."),
                       "content": S("File content."),
                       "encoding": E(["text", "base64"], "Content encoding.", default="text"),
                       "execute_filemode": B("Set executable bit (chmod).")},
                      "File action.", req=["action", "file_path"]), "File actions.", minItems=1),
       "author_email": EMAIL("Author email."), "author_name": S("Author name.")},
      ["project_id", "branch", "commit_message", "actions"])

    t("CREATE_BRANCH", "write", "Creates a GitLab branch from an existing branch, tag or commit SHA.",
      {"project_id": proj, "branch": S("New branch."), "ref": S("Source branch, tag or SHA.")},
      ["project_id", "branch", "ref"])

    t("DELETE_BRANCH", "delete", "Deletes a branch (protected branches excluded).",
      {"project_id": proj, "branch": S("Branch.")}, ["project_id", "branch"])

    t("SEARCH_PROJECTS", "read", "Searches projects the user can access by name, membership, ownership or visibility.",
      {"search": S("Name fragment."), "membership": B("Only projects I'm a member of.", default=False),
       "owned": B("Only owned projects.", default=False),
       "visibility": E(["public", "internal", "private"], "Visibility."),
       "order_by": E(["id", "name", "path", "created_at", "updated_at", "last_activity_at"], "Order."),
       "per_page": pp})

    t("CREATE_PROJECT", "write", "Creates a project in a namespace, optionally initialized with a README.",
      {"name": S("Name."), "path": S("URL path."), "namespace_id": iid("Group namespace."),
       "description": S("Description."), "visibility": E(["public", "internal", "private"], "Visibility.",
                                                          default="private"),
       "initialize_with_readme": B("Create README.", default=False), "default_branch": S("Default branch.")},
      ["name"])

    t("ADD_PROJECT_MEMBER", "write", "Gives a user access to a project at a given role.",
      {"project_id": proj, "user_id": iid("User ID."),
       "access_level": E([10, 20, 30, 40, 50], "10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner."),
       "expires_at": DATE("Membership expiry.")}, ["project_id", "user_id", "access_level"])


@integration("bitbucket", "code_hosting")
def _bitbucket(t):
    ws = S("Workspace ID or slug.")
    rs = S("Repository slug.")
    pr = I("Pull request ID.", minimum=1)
    base = {"workspace": ws, "repo_slug": rs}

    def r(extra=None):
        d = dict(base)
        d.update(extra or {})
        return d

    t("CREATE_PULL_REQUEST", "write",
      "Opens a Bitbucket pull request from a source branch, with reviewers and an option to close the branch after merge.",
      r({"title": S("Title."), "source_branch": S("Source branch."),
         "destination_branch": S("Destination; the main branch if omitted."), "description": S("Markdown description."),
         "reviewers": STRS("Reviewer account UUIDs, e.g. '{a1b2...}'."),
         "close_source_branch": B("Close source branch on merge.", default=False),
         "draft": B("Create as draft.", default=False)}), ["workspace", "repo_slug", "title", "source_branch"])

    t("LIST_PULL_REQUESTS", "read",
      "Lists pull requests by state, or with a BBQL query such as author.nickname=\"ana\" AND destination.branch.name=\"main\".",
      r({"state": E(["OPEN", "MERGED", "DECLINED", "SUPERSEDED"], "State.", default="OPEN"),
         "q": S("BBQL filter."), "sort": S("Sort field, e.g. '-updated_on'."), "pagelen": LIM(10, 50),
         "page": I("Page.", default=1, minimum=1)}), ["workspace", "repo_slug"])

    t("GET_PULL_REQUEST_DIFF", "read", "Returns the unified diff of a pull request.",
      r({"pull_request_id": pr}), ["workspace", "repo_slug", "pull_request_id"])

    t("ADD_PULL_REQUEST_COMMENT", "write", "Comments on a pull request, generally or inline on a file line.",
      r({"pull_request_id": pr, "content": S("Markdown comment."),
         "inline": O({"path": S("File path."), "to": I("Line in the new version.", minimum=1),
                      "from": I("Line in the old version.", minimum=1)}, "Inline anchor.", req=["path"]),
         "parent_id": I("Reply to this comment.")}), ["workspace", "repo_slug", "pull_request_id", "content"])

    t("APPROVE_PULL_REQUEST", "write", "Approves a pull request as the current user.",
      r({"pull_request_id": pr}), ["workspace", "repo_slug", "pull_request_id"])

    t("MERGE_PULL_REQUEST", "write", "Merges a pull request with a merge commit, squash or fast-forward.",
      r({"pull_request_id": pr,
         "merge_strategy": E(["merge_commit", "squash", "fast_forward"], "Strategy.", default="merge_commit"),
         "message": S("Merge commit message."), "close_source_branch": B("Close source branch.")}),
      ["workspace", "repo_slug", "pull_request_id"])

    t("DECLINE_PULL_REQUEST", "write", "Declines a pull request, closing it without merging.",
      r({"pull_request_id": pr}), ["workspace", "repo_slug", "pull_request_id"])

    t("LIST_REPOSITORIES", "read", "Lists repositories in a workspace, filtered by role or BBQL.",
      {"workspace": ws, "role": E(["member", "contributor", "admin", "owner"], "Caller's role."),
       "q": S("BBQL, e.g. 'project.key=\"WEB\"'."), "sort": S("e.g. '-updated_on'."), "pagelen": LIM(10, 100)},
      ["workspace"])

    t("CREATE_REPOSITORY", "write", "Creates a Git repository in a workspace project.",
      r({"project_key": S("Project key."), "is_private": B("Private.", default=True),
         "description": S("Description."),
         "fork_policy": E(["allow_forks", "no_public_forks", "no_forks"], "Fork policy.", default="no_public_forks"),
         "language": S("Main language.")}), ["workspace", "repo_slug"])

    t("DELETE_REPOSITORY", "delete", "Deletes a repository and all of its data immediately; this is irreversible.",
      r(), ["workspace", "repo_slug"])

    t("GET_FILE_CONTENT", "read", "Reads a file or directory listing at a branch, tag or commit.",
      r({"commit": S("Branch, tag or commit hash."), "path": S("File path.")}),
      ["workspace", "repo_slug", "commit", "path"])

    t("LIST_COMMITS", "read", "Lists commits reachable from a branch, optionally limited to a path.",
      r({"include": S("Branch or hash to include."), "exclude": S("Branch or hash to exclude."),
         "path": S("Path filter."), "pagelen": LIM(30, 100)}), ["workspace", "repo_slug"])

    t("CREATE_BRANCH", "write", "Creates a branch pointing at a commit hash.",
      r({"name": S("Branch name."), "target_hash": S("Commit hash.")}), ["workspace", "repo_slug", "name", "target_hash"])

    t("DELETE_BRANCH", "delete", "Deletes a branch from a Bitbucket repository; open pull requests from it are declined.", r({"name": S("Branch name.")}), ["workspace", "repo_slug", "name"])

    t("TRIGGER_PIPELINE", "unknown",
      "Runs Bitbucket Pipelines for a branch or tag, or a custom pipeline from bitbucket-pipelines.yml, with variables. "
      "The steps may build, deploy or touch external systems.",
      r({"ref_type": E(["branch", "tag"], "Ref type.", default="branch"), "ref_name": S("Branch or tag."),
         "custom_pipeline": S("Name under pipelines.custom to run."),
         "variables": A(O({"key": S("Name."), "value": S("Value."), "secured": B("Mask in logs.", default=False)},
                          "Variable.", req=["key", "value"]), "Pipeline variables.")}),
      ["workspace", "repo_slug", "ref_type", "ref_name"])

    t("LIST_PIPELINES", "read", "Lists recent pipeline runs with state and trigger.",
      r({"sort": S("e.g. '-created_on'.", default="-created_on"), "pagelen": LIM(10, 100)}),
      ["workspace", "repo_slug"])

    t("LIST_WORKSPACE_MEMBERS", "read", "Lists members of a workspace with their account UUIDs.",
      {"workspace": ws}, ["workspace"])


# ===========================================================================
# Storage
# ===========================================================================

@integration("google_drive", "storage")
def _gdrive(t):
    fid = S("Drive file or folder ID.")

    t("UPLOAD_FILE", "write",
      "Uploads a file into a Google Drive folder. Set convert_to to turn CSV, DOCX and similar files into native "
      "Google Docs, Sheets or Slides on upload.",
      {"name": S("File name."), "parent_folder_id": S("Destination folder; My Drive root if omitted."),
       "mime_type": S("MIME type of the content."), "content": S("Text content."),
       "content_base64": S("Binary content, base64 encoded.", contentEncoding="base64"),
       "description": S("File description."),
       "convert_to": E(["document", "spreadsheet", "presentation"], "Convert to a Google Workspace type."),
       "supports_all_drives": B("Allow shared drive destinations.", default=True)}, ["name"])

    t("SEARCH_FILES", "read",
      "Finds files and folders with a Drive query such as \"name contains 'budget' and "
      "mimeType = 'application/vnd.google-apps.spreadsheet' and trashed = false\". "
      "Use corpora=allDrives to include shared drives.",
      {"q": S("Drive search query."), "corpora": E(["user", "drive", "domain", "allDrives"], "Corpus.", default="user"),
       "drive_id": S("Shared drive ID when corpora is 'drive'."),
       "order_by": S("Sort, e.g. 'modifiedTime desc'."), "page_size": LIM(100, 1000),
       "page_token": S("Next page token."), "fields": S("Partial response fields.")})

    t("GET_FILE_METADATA", "read", "Returns a file's metadata: name, type, owners, size, parents, links and times.",
      {"file_id": fid, "fields": S("Fields to return.",
                                   default="id,name,mimeType,modifiedTime,owners,webViewLink,size,parents")},
      ["file_id"])

    t("DOWNLOAD_FILE", "read",
      "Downloads the bytes of a regular file (PDF, image, ZIP...). Google Docs, Sheets and Slides must be exported instead.",
      {"file_id": fid}, ["file_id"])

    t("EXPORT_FILE", "read",
      "Exports a Google Doc, Sheet, Slides deck or Drawing to PDF, DOCX, XLSX, CSV, HTML or plain text (10 MB limit).",
      {"file_id": fid, "mime_type": E(["application/pdf",
                                       "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                                       "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                                       "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                                       "text/csv", "text/plain", "text/html"], "Target format.")},
      ["file_id", "mime_type"])

    t("CREATE_FOLDER", "write", "Creates a folder, optionally inside another folder.",
      {"name": S("Folder name."), "parent_folder_id": S("Parent folder.")}, ["name"])

    t("MOVE_FILE", "write", "Moves a file to another folder by adding the new parent and removing the old one.",
      {"file_id": fid, "add_parents": S("New parent folder ID."), "remove_parents": S("Parent folder ID to remove.")},
      ["file_id", "add_parents"])

    t("COPY_FILE", "write", "Makes a copy of a file, optionally renamed and placed in another folder.",
      {"file_id": fid, "name": S("Name of the copy."), "parent_folder_id": S("Folder for the copy.")}, ["file_id"])

    t("UPDATE_FILE_METADATA", "write",
      "Renames a file or changes its description, starred flag or custom properties, leaving content untouched.",
      {"file_id": fid, "name": S("New name."), "description": S("Description."), "starred": B("Starred."),
       "properties": MAP("Custom key/value properties.", "string")}, ["file_id"])

    t("TRASH_FILE", "delete", "Moves a file or folder to the trash, where it can be restored for 30 days.",
      {"file_id": fid}, ["file_id"])

    t("DELETE_FILE_PERMANENTLY", "delete",
      "Permanently deletes a file the user owns, skipping the trash. Shared drive items require organizer access.",
      {"file_id": fid}, ["file_id"])

    t("EMPTY_TRASH", "delete", "Permanently deletes everything in the user's trash. Cannot be undone.",
      {"drive_id": S("Empty a shared drive's trash instead.")})

    t("SHARE_FILE", "send",
      "Shares a file or folder with a user, group, domain or anyone with the link, and emails people a "
      "notification with an optional message.",
      {"file_id": fid, "type": E(["user", "group", "domain", "anyone"], "Grantee type."),
       "role": E(["reader", "commenter", "writer", "fileOrganizer", "organizer", "owner"], "Access role."),
       "email_address": EMAIL("User or group email."), "domain": S("Domain for type 'domain'."),
       "send_notification_email": B("Email the grantee.", default=True), "email_message": S("Message in the email."),
       "allow_file_discovery": B("Discoverable via search (domain/anyone).", default=False)},
      ["file_id", "type", "role"])

    t("LIST_PERMISSIONS", "read", "Lists who has access to a file and with which role.", {"file_id": fid}, ["file_id"])

    t("REMOVE_PERMISSION", "delete", "Revokes a permission from a file or folder.",
      {"file_id": fid, "permission_id": S("Permission ID.")}, ["file_id", "permission_id"])

    t("LIST_SHARED_DRIVES", "read", "Lists shared drives the user can access.",
      {"q": S("Shared drive query, e.g. \"name contains 'Finance'\"."), "page_size": LIM(10, 100),
       "page_token": S("Next page token.")})

    t("CREATE_COMMENT", "write", "Adds a comment to a file, optionally quoting the text it refers to.",
      {"file_id": fid, "content": S("Comment text."), "quoted_text": S("Text the comment is about.")},
      ["file_id", "content"])

    t("LIST_REVISIONS", "read", "Lists the revision history of a file.",
      {"file_id": fid, "page_size": LIM(200, 1000)}, ["file_id"])


@integration("dropbox", "storage")
def _dropbox(t):
    path = lambda d="Dropbox path such as '/Reports/Q3.pdf', or an 'id:' reference.": S(d)

    t("UPLOAD_FILE", "write",
      "Uploads a file (up to 150 MB) to a Dropbox path, adding alongside or overwriting an existing file.",
      {"path": path("Destination path including file name."), "content": S("Text content."),
       "content_base64": S("Binary content, base64 encoded.", contentEncoding="base64"),
       "mode": E(["add", "overwrite"], "Write mode.", default="add"),
       "autorename": B("Rename on conflict instead of failing.", default=False),
       "mute": B("Don't notify desktop clients of the change.", default=False)}, ["path"])

    t("DOWNLOAD_FILE", "read", "Downloads a file's content along with its metadata.", {"path": path()}, ["path"])

    t("LIST_FOLDER", "read",
      "Lists a folder's contents ('' is the root). Set recursive to walk subfolders; when has_more is true, "
      "keep going with DROPBOX_LIST_FOLDER_CONTINUE.",
      {"path": path("Folder path; '' for root."), "recursive": B("Include subfolders.", default=False),
       "include_deleted": B("Include deleted entries.", default=False), "limit": LIM(500, 2000)}, ["path"])

    t("LIST_FOLDER_CONTINUE", "read", "Fetches the next page of a folder listing using the cursor.",
      {"cursor": S("Cursor from the previous listing.")}, ["cursor"])

    t("SEARCH_FILES", "read", "Searches file and folder names and content, optionally within a path and by file category.",
      {"query": S("Search text."), "path": path("Scope to this folder."), "file_extensions": STRS("e.g. ['pdf', 'docx']."),
       "file_categories": A(E(["image", "document", "pdf", "spreadsheet", "presentation", "audio", "video", "folder",
                               "paper", "others"], "Category."), "Categories."),
       "filename_only": B("Match names only.", default=False), "max_results": LIM(100, 1000)}, ["query"])

    t("GET_METADATA", "read", "Gets metadata for a file or folder: size, revision, modified time, sharing info.",
      {"path": path(), "include_media_info": B("Include photo/video info.", default=False)}, ["path"])

    t("CREATE_FOLDER", "write", "Creates a Dropbox folder at the given path, including missing parent folders.",
      {"path": path("Folder path."), "autorename": B("Rename on conflict.", default=False)}, ["path"])

    t("MOVE_ITEM", "write", "Moves or renames a file or folder.",
      {"from_path": path("Current path."), "to_path": path("New path."), "autorename": B("Rename on conflict.", default=False),
       "allow_ownership_transfer": B("Allow moves that change ownership.", default=False)}, ["from_path", "to_path"])

    t("COPY_ITEM", "write", "Copies a file or folder to another path.",
      {"from_path": path("Source."), "to_path": path("Destination."), "autorename": B("Rename on conflict.", default=False)},
      ["from_path", "to_path"])

    t("DELETE_ITEM", "delete",
      "Deletes a file or folder (folders recursively). Deleted items can be restored from the website during the plan's recovery window.",
      {"path": path(), "parent_rev": S("Only delete if the file is at this revision.")}, ["path"])

    t("CREATE_SHARED_LINK", "write",
      "Creates a shared link for a file or folder with visibility, password, expiry and download settings.",
      {"path": path(), "requested_visibility": E(["public", "team_only", "password"], "Visibility."),
       "link_password": S("Password when visibility is 'password'."), "expires": DT("Expiry."),
       "audience": E(["public", "team", "no_one"], "Who can open the link."),
       "access": E(["viewer", "editor"], "Access level.", default="viewer"),
       "allow_download": B("Allow downloads.", default=True)}, ["path"])

    t("LIST_SHARED_LINKS", "read", "Lists existing shared links, optionally just those for one path.",
      {"path": path(), "direct_only": B("Exclude links to parent folders.", default=False), "cursor": S("Cursor.")})

    t("REVOKE_SHARED_LINK", "delete", "Revokes a shared link so it stops working.",
      {"url": URI("Shared link URL.")}, ["url"])

    t("SHARE_FOLDER", "write",
      "Turns a folder into a shared folder and sets its policies, without inviting anyone yet.",
      {"path": path("Folder path."), "acl_update_policy": E(["owner", "editors"], "Who can change membership."),
       "shared_link_policy": E(["anyone", "team", "members"], "Who can open shared links."),
       "member_policy": E(["team", "anyone"], "Who can be a member.")}, ["path"])

    t("ADD_FOLDER_MEMBER", "send",
      "Invites people to a shared folder by email with an access level; Dropbox sends them the invitation "
      "with your custom message.",
      {"shared_folder_id": S("Shared folder ID."),
       "members": A(O({"email": EMAIL("Invitee."),
                       "access_level": E(["editor", "viewer", "viewer_no_comment"], "Access.", default="editor")},
                      "Member to add.", req=["email"]), "Members.", minItems=1),
       "custom_message": S("Message in the invitation."), "quiet": B("Skip the notification email.", default=False)},
      ["shared_folder_id", "members"])

    t("LIST_REVISIONS", "read", "Lists previous revisions of a file.",
      {"path": path(), "limit": LIM(10, 100)}, ["path"])

    t("RESTORE_FILE", "write", "Restores a file to a specific earlier revision.",
      {"path": path(), "rev": S("Revision ID.")}, ["path", "rev"])

    t("SAVE_URL", "write", "Saves a file from a public URL straight into Dropbox (runs asynchronously).",
      {"path": path("Destination path."), "url": URI("Source URL.")}, ["path", "url"])

    t("GET_TEMPORARY_LINK", "read", "Returns a direct download link to a file that stays valid for four hours.",
      {"path": path()}, ["path"])


@integration("box", "storage")
def _box(t):
    fid = S("Box file ID.")
    fold = lambda d="Box folder ID; '0' is the root All Files folder.": S(d)

    t("UPLOAD_FILE", "write", "Uploads a new file into a Box folder.",
      {"parent_folder_id": fold(), "name": S("File name."), "content": S("Text content."),
       "content_base64": S("Binary content, base64 encoded.", contentEncoding="base64"),
       "content_created_at": DT("Original creation time.")}, ["parent_folder_id", "name"])

    t("GET_FILE_INFO", "read", "Returns a file's details: name, size, owner, parent path, version and shared link.",
      {"file_id": fid, "fields": STRS("Fields to return.")}, ["file_id"])

    t("DOWNLOAD_FILE", "read", "Downloads a file's content, optionally an older version.",
      {"file_id": fid, "version": S("File version ID.")}, ["file_id"])

    t("LIST_FOLDER_ITEMS", "read", "Lists the files, folders and web links in a folder.",
      {"folder_id": fold(), "fields": STRS("Fields."), "limit": LIM(100, 1000),
       "offset": I("Offset.", default=0, minimum=0), "sort": E(["id", "name", "date", "size"], "Sort."),
       "direction": E(["ASC", "DESC"], "Direction.")}, ["folder_id"])

    t("SEARCH", "read",
      "Searches names, descriptions, file text, comments and tags across content the user can access, with filters "
      "for type, extension, folders, owners and dates.",
      {"query": S("Search text."), "type": E(["file", "folder", "web_link"], "Item type."),
       "file_extensions": STRS("Extensions."), "ancestor_folder_ids": STRS("Limit to these folders."),
       "content_types": A(E(["name", "description", "file_content", "comments", "tag"], "Where to look."),
                          "Fields to search."),
       "created_at_range": S("Two comma-separated RFC 3339 times; either side may be empty."),
       "owner_user_ids": STRS("Owners."), "limit": LIM(30, 200), "offset": I("Offset.", default=0, minimum=0)},
      ["query"])

    t("CREATE_FOLDER", "write", "Creates a folder inside a parent folder.",
      {"name": S("Folder name."), "parent_folder_id": fold()}, ["name", "parent_folder_id"])

    t("UPDATE_FILE", "write", "Renames or moves a file, or changes its description and tags.",
      {"file_id": fid, "name": S("New name."), "parent_folder_id": fold("New parent folder."),
       "description": S("Description."), "tags": STRS("Tags.")}, ["file_id"])

    t("COPY_FILE", "write", "Copies a Box file into another folder, optionally under a new name.",
      {"file_id": fid, "parent_folder_id": fold("Destination."), "name": S("Name of the copy.")},
      ["file_id", "parent_folder_id"])

    t("DELETE_FILE", "delete", "Moves a file to the trash; retention policies decide when it is purged.",
      {"file_id": fid, "if_match": S("Only delete if the etag matches.")}, ["file_id"])

    t("DELETE_FOLDER", "delete", "Deletes a folder; non-empty folders need recursive=true.",
      {"folder_id": fold(), "recursive": B("Delete contents too.", default=False)}, ["folder_id"])

    t("CREATE_SHARED_LINK", "write", "Creates or updates the shared link on a file or folder.",
      {"item_type": E(["file", "folder"], "Item type."), "item_id": S("Item ID."),
       "access": E(["open", "company", "collaborators"], "Who can use the link."), "password": S("Password."),
       "unshared_at": DT("Expiry."), "can_download": B("Allow download.", default=True),
       "vanity_name": S("Custom link name.")}, ["item_type", "item_id"])

    t("ADD_COLLABORATION", "send",
      "Invites a user or group to collaborate on a folder or file with a Box role such as editor or viewer; "
      "Box emails the invitation by default.",
      {"item_type": E(["folder", "file"], "Item type."), "item_id": S("Item ID."),
       "accessible_by_login": EMAIL("Invitee email."), "accessible_by_group_id": S("Group ID."),
       "role": E(["editor", "viewer", "previewer", "uploader", "previewer uploader", "viewer uploader", "co-owner"],
                 "Collaboration role."),
       "notify": B("Send the email notification.", default=True), "expires_at": DT("Expiry."),
       "can_view_path": B("Let the invitee see the parent path.", default=False)},
      ["item_type", "item_id", "role"])

    t("LIST_COLLABORATIONS", "read", "Lists collaborators on a file or folder and their roles.",
      {"item_type": E(["file", "folder"], "Item type."), "item_id": S("Item ID.")}, ["item_type", "item_id"])

    t("CREATE_COMMENT", "write", "Comments on a file; @mentions notify the mentioned users.",
      {"file_id": fid, "message": S("Comment text.")}, ["file_id", "message"])

    t("CREATE_TASK", "write", "Creates a review or completion task on a file with a message and due date.",
      {"file_id": fid, "action": E(["review", "complete"], "Task type.", default="review"), "message": S("Message."),
       "due_at": DT("Due."), "completion_rule": E(["all_assignees", "any_assignee"], "Completion rule.")}, ["file_id"])

    t("APPLY_METADATA_TEMPLATE", "write", "Applies a metadata template instance with values to a file.",
      {"file_id": fid, "scope": E(["global", "enterprise"], "Template scope."), "template_key": S("Template key."),
       "values": MAP("Field values keyed by template field key.")}, ["file_id", "scope", "template_key", "values"])

    t("LOCK_FILE", "write", "Locks a file against edits, optionally preventing downloads, until an expiry.",
      {"file_id": fid, "expires_at": DT("When the lock releases."),
       "is_download_prevented": B("Block downloads.", default=False)}, ["file_id"])

    t("LIST_TRASHED_ITEMS", "read", "Lists items in the user's trash.",
      {"limit": LIM(100, 1000), "offset": I("Offset.", default=0, minimum=0)})


@integration("onedrive", "storage")
def _onedrive(t):
    item = S("DriveItem ID.")
    drive = S("Drive ID; the signed-in user's OneDrive if omitted.")

    t("UPLOAD_FILE", "write",
      "Uploads a file to a OneDrive folder path. Small files go in one request and larger ones through an upload session.",
      {"folder_path": S("Destination folder path, e.g. '/Documents/Invoices'.", default="/"),
       "file_name": S("File name."), "content": S("Text content."),
       "content_base64": S("Binary content, base64 encoded.", contentEncoding="base64"),
       "conflict_behavior": E(["rename", "replace", "fail"], "On name conflict.", default="rename"),
       "drive_id": drive}, ["file_name"])

    t("GET_ITEM", "read", "Gets a file or folder by item ID or path, with size, dates, links and parent.",
      {"item_id": item, "path": S("Path relative to the drive root."), "drive_id": drive})

    t("LIST_CHILDREN", "read", "Lists the children of a folder (the root if none is given).",
      {"item_id": S("Folder item ID.", default="root"), "path": S("Folder path instead of ID."),
       "top": LIM(200, 999), "order_by": S("e.g. 'name asc' or 'lastModifiedDateTime desc'."),
       "select": STRS("Properties to return.")})

    t("SEARCH_FILES", "read",
      "Searches the user's OneDrive, and items shared with them, by file name, metadata and content.",
      {"query": S("Search text."), "top": LIM(50, 200)}, ["query"])

    t("DOWNLOAD_FILE", "read",
      "Downloads a file's content, optionally converting it on the fly (for example DOCX to PDF).",
      {"item_id": item, "format": E(["pdf", "html", "jpg"], "Convert to this format.")}, ["item_id"])

    t("CREATE_FOLDER", "write", "Creates a folder under a parent item.",
      {"parent_item_id": S("Parent folder ID.", default="root"), "name": S("Folder name."),
       "conflict_behavior": E(["rename", "replace", "fail"], "On conflict.", default="fail")}, ["name"])

    t("UPDATE_ITEM", "write", "Renames an item or moves it to another parent folder.",
      {"item_id": item, "name": S("New name."), "new_parent_id": S("New parent folder ID."),
       "description": S("Description.")}, ["item_id"])

    t("COPY_ITEM", "write",
      "Starts an asynchronous copy of a file or folder and returns a monitor URL to poll for completion.",
      {"item_id": item, "destination_parent_id": S("Destination folder ID."),
       "destination_drive_id": S("Destination drive."), "name": S("Name of the copy.")},
      ["item_id", "destination_parent_id"])

    t("DELETE_ITEM", "delete", "Deletes a file or folder into the OneDrive recycle bin.", {"item_id": item}, ["item_id"])

    t("CREATE_SHARING_LINK", "write",
      "Creates a view, edit or embed link for an item; scope decides who can use it (anyone, the organization, "
      "or specific people).",
      {"item_id": item, "type": E(["view", "edit", "embed"], "Link type."),
       "scope": E(["anonymous", "organization", "users"], "Link scope."), "password": S("Link password."),
       "expiration_date_time": DT("Expiry."),
       "retain_inherited_permissions": B("Keep inherited permissions.", default=False)}, ["item_id", "type"])

    t("INVITE_PEOPLE", "send",
      "Grants specific people access to an item and emails them a sharing invitation with an optional message.",
      {"item_id": item, "recipients": EMAILS("People to invite.", minItems=1),
       "roles": A(E(["read", "write"], "Role."), "Roles to grant.", minItems=1), "message": S("Invitation text."),
       "require_sign_in": B("Require sign-in.", default=True), "send_invitation": B("Send email.", default=True),
       "expiration_date_time": DT("Access expiry.")}, ["item_id", "recipients", "roles"])

    t("LIST_PERMISSIONS", "read", "Lists the sharing permissions and links on an item.", {"item_id": item}, ["item_id"])

    t("DELETE_PERMISSION", "delete", "Removes a sharing link or direct permission from an item.",
      {"item_id": item, "permission_id": S("Permission ID.")}, ["item_id", "permission_id"])

    t("LIST_RECENT_FILES", "read", "Lists files the user recently opened or changed across OneDrive and SharePoint.",
      {"top": LIM(25, 200)})

    t("LIST_SHARED_WITH_ME", "read", "Lists files and folders other people have shared with the user.")

    t("LIST_VERSIONS", "read", "Lists a file's previous versions.", {"item_id": item}, ["item_id"])

    t("RESTORE_VERSION", "write", "Makes an earlier version the current version of a file.",
      {"item_id": item, "version_id": S("Version ID.")}, ["item_id", "version_id"])

    t("GET_DRIVE_QUOTA", "read", "Reports storage used, remaining and total for the drive.", {"drive_id": drive})


# ===========================================================================
# Calendars
# ===========================================================================

@integration("google_calendar", "calendar")
def _gcal(t):
    cal = S("Calendar ID; 'primary' for the user's main calendar.", default="primary")
    ev = S("Event ID.")
    when = lambda d: O({"date_time": DT("Start or end time (RFC 3339)."), "date": DATE("Date, for all-day events."),
                        "time_zone": S("IANA time zone, e.g. 'Europe/Berlin'.")}, d)
    send_updates = E(["all", "externalOnly", "none"], "Which guests get email updates.", default="none")
    attendees = A(O({"email": EMAIL("Guest email."), "optional": B("Optional guest.", default=False),
                     "display_name": S("Guest name.")}, "A guest.", req=["email"]), "Guests.")

    t("CREATE_EVENT", "write",
      "Creates an event on a Google Calendar with start and end times (or all-day dates), location, guests, "
      "recurrence and reminders, and can add a Google Meet link. Guests are emailed only when send_updates is "
      "'all' or 'externalOnly'.",
      {"calendar_id": cal, "summary": S("Event title."), "description": S("Description (HTML allowed)."),
       "location": S("Location."), "start": when("When the event starts."), "end": when("When the event ends."),
       "attendees": attendees,
       "recurrence": STRS("RRULE/EXDATE lines, e.g. 'RRULE:FREQ=WEEKLY;BYDAY=MO'."),
       "reminders": O({"use_default": B("Use calendar defaults.", default=True),
                       "overrides": A(O({"method": E(["email", "popup"], "Reminder method."),
                                         "minutes": I("Minutes before start.", minimum=0, maximum=40320)},
                                        "Reminder.", req=["method", "minutes"]), "Custom reminders.", maxItems=5)},
                      "Reminder settings."),
       "add_google_meet": B("Attach a Google Meet conference.", default=False),
       "visibility": E(["default", "public", "private", "confidential"], "Visibility.", default="default"),
       "transparency": E(["opaque", "transparent"], "Whether the event blocks time.", default="opaque"),
       "color_id": S("Event color ID ('1'-'11')."), "send_updates": send_updates},
      ["start", "end"])

    t("QUICK_ADD_EVENT", "write",
      "Creates an event from one line of natural language, like 'Dinner with Sam at Nopa Friday 7pm', letting Google parse it.",
      {"calendar_id": cal, "text": S("Event text."), "send_updates": send_updates}, ["text"])

    t("GET_EVENT", "read", "Fetches one event with its times, guests and their responses, and conference data.",
      {"calendar_id": cal, "event_id": ev}, ["event_id"])

    t("LIST_EVENTS", "read",
      "Lists events between time_min and time_max. With single_events=true recurring series are expanded into "
      "instances that can be ordered by start time.",
      {"calendar_id": cal, "time_min": DT("Lower bound (exclusive end time)."), "time_max": DT("Upper bound."),
       "q": S("Free-text filter."), "single_events": B("Expand recurring events.", default=True),
       "order_by": E(["startTime", "updated"], "Order (startTime needs single_events)."),
       "max_results": LIM(250, 2500), "page_token": S("Next page token."),
       "show_deleted": B("Include cancelled events.", default=False), "time_zone": S("Response time zone.")})

    t("UPDATE_EVENT", "write", "Patches an event's title, description, location, times or guest list.",
      {"calendar_id": cal, "event_id": ev, "summary": S("Title."), "description": S("Description."),
       "location": S("Location."), "start": when("New start."), "end": when("New end."), "attendees": attendees,
       "send_updates": send_updates}, ["event_id"])

    t("DELETE_EVENT", "delete", "Deletes an event, optionally emailing guests a cancellation.",
      {"calendar_id": cal, "event_id": ev, "send_updates": send_updates}, ["event_id"])

    t("MOVE_EVENT", "write", "Moves an event to another calendar, changing its organizer.",
      {"calendar_id": cal, "event_id": ev, "destination_calendar_id": S("Target calendar.")},
      ["event_id", "destination_calendar_id"])

    t("ADD_ATTENDEES", "send",
      "Adds guests to an existing event and emails them the invitation, without touching other event fields.",
      {"calendar_id": cal, "event_id": ev, "emails": EMAILS("Guests to add.", minItems=1),
       "optional": B("Add them as optional guests.", default=False),
       "send_updates": E(["all", "externalOnly"], "Who gets the invite email.", default="all")},
      ["event_id", "emails"])

    t("RESPOND_TO_EVENT", "send",
      "RSVPs to an invitation (accepted, declined or tentative) with an optional note; the organizer is notified.",
      {"calendar_id": cal, "event_id": ev, "response_status": E(["accepted", "declined", "tentative"], "Response."),
       "comment": S("Note to the organizer.")}, ["event_id", "response_status"])

    t("FIND_FREE_BUSY", "read",
      "Returns busy intervals for calendars (people, rooms or groups) in a time window, for finding a slot everyone has free.",
      {"time_min": DT("Window start."), "time_max": DT("Window end."),
       "calendar_ids": STRS("Calendar IDs or emails.", minItems=1, maxItems=50), "time_zone": S("Time zone.")},
      ["time_min", "time_max", "calendar_ids"])

    t("LIST_CALENDARS", "read", "Lists calendars on the user's calendar list with access roles and colors.",
      {"min_access_role": E(["freeBusyReader", "reader", "writer", "owner"], "Minimum access."),
       "show_hidden": B("Include hidden calendars.", default=False)})

    t("CREATE_CALENDAR", "write", "Creates a secondary Google calendar owned by the user, e.g. for a team rota or project.",
      {"summary": S("Calendar name."), "description": S("Description."), "time_zone": S("Time zone.")}, ["summary"])

    t("DELETE_CALENDAR", "delete", "Deletes a secondary calendar along with all of its events.",
      {"calendar_id": S("Secondary calendar ID.")}, ["calendar_id"])

    t("SHARE_CALENDAR", "write",
      "Grants a person, group or domain access to a calendar (free/busy, read, write or owner) via an ACL rule.",
      {"calendar_id": cal, "scope_type": E(["user", "group", "domain", "default"], "Grantee type."),
       "scope_value": S("Email or domain."), "role": E(["freeBusyReader", "reader", "writer", "owner"], "Role."),
       "send_notifications": B("Notify the grantee.", default=True)}, ["calendar_id", "scope_type", "role"])

    t("LIST_EVENT_INSTANCES", "read", "Lists the individual occurrences of a recurring event.",
      {"calendar_id": cal, "event_id": ev, "time_min": DT("From."), "time_max": DT("To."),
       "max_results": LIM(250, 2500)}, ["event_id"])

    t("CREATE_OUT_OF_OFFICE", "write",
      "Blocks time as Out of office; Calendar can auto-decline new or existing invitations during that period.",
      {"start_date_time": DT("Start."), "end_date_time": DT("End."), "summary": S("Title.", default="Out of office"),
       "auto_decline_mode": E(["declineNone", "declineAllConflictingInvitations", "declineOnlyNewConflictingInvitations"],
                              "Auto-decline behaviour.", default="declineOnlyNewConflictingInvitations"),
       "decline_message": S("Message sent with declines."), "time_zone": S("Time zone.")},
      ["start_date_time", "end_date_time"])


@integration("outlook_calendar", "calendar")
def _ocal(t):
    dtz = lambda d: O({"date_time": S("Local date and time without offset, e.g. '2024-06-03T14:00:00'."),
                       "time_zone": S("Windows or IANA time zone name.", default="UTC")}, d, req=["date_time"])
    ev = S("Event ID.")
    show_as = E(["free", "tentative", "busy", "oof", "workingElsewhere"], "Free/busy status.", default="busy")

    t("CREATE_EVENT", "write",
      "Adds a personal appointment to the user's Outlook calendar without inviting anyone. "
      "To invite people, use OUTLOOK_CALENDAR_CREATE_MEETING.",
      {"calendar_id": S("Calendar ID; default calendar if omitted."), "subject": S("Title."),
       "body": S("Body (HTML)."), "start": dtz("Start."), "end": dtz("End."), "location": S("Location."),
       "is_all_day": B("All-day event.", default=False), "show_as": show_as,
       "reminder_minutes_before_start": I("Reminder lead time.", default=15, minimum=0),
       "categories": STRS("Outlook categories."),
       "sensitivity": E(["normal", "personal", "private", "confidential"], "Sensitivity.", default="normal")},
      ["subject", "start", "end"])

    t("CREATE_MEETING", "send",
      "Schedules a meeting on the organizer's Outlook calendar and sends meeting requests to the attendees. "
      "It can generate a Teams join link and repeat on a recurrence pattern.",
      {"subject": S("Meeting title."), "body": S("Agenda (HTML)."), "start": dtz("Start."), "end": dtz("End."),
       "location": S("Room or place."),
       "attendees": A(O({"email": EMAIL("Attendee."), "name": S("Display name."),
                         "type": E(["required", "optional", "resource"], "Attendee type.", default="required")},
                        "Attendee.", req=["email"]), "People and rooms to invite.", minItems=1),
       "is_online_meeting": B("Create an online meeting link.", default=True),
       "online_meeting_provider": E(["teamsForBusiness", "skypeForBusiness", "skypeForConsumer"], "Provider.",
                                    default="teamsForBusiness"),
       "recurrence": O({
           "pattern": O({"type": E(["daily", "weekly", "absoluteMonthly", "relativeMonthly", "absoluteYearly",
                                    "relativeYearly"], "Pattern type."),
                         "interval": I("Repeat every N units.", minimum=1),
                         "days_of_week": A(E(["sunday", "monday", "tuesday", "wednesday", "thursday", "friday",
                                              "saturday"], "Day."), "Days for weekly patterns.")},
                        "How often it repeats.", req=["type", "interval"]),
           "range": O({"type": E(["endDate", "noEnd", "numbered"], "Range type."), "start_date": DATE("First date."),
                       "end_date": DATE("Last date."), "number_of_occurrences": I("Occurrences.", minimum=1)},
                      "How long it repeats.", req=["type", "start_date"]),
       }, "Recurrence for a series.", req=["pattern", "range"]),
       "allow_new_time_proposals": B("Let attendees propose new times.", default=True),
       "response_requested": B("Ask attendees to respond.", default=True),
       "importance": E(["low", "normal", "high"], "Importance.", default="normal")},
      ["subject", "start", "end", "attendees"])

    t("GET_EVENT", "read", "Gets an event with attendees, their responses and the online meeting link.",
      {"event_id": ev}, ["event_id"])

    t("LIST_EVENTS", "read",
      "Returns events in a date range from the calendar view, with recurring series expanded into occurrences.",
      {"start_date_time": DT("Range start."), "end_date_time": DT("Range end."), "calendar_id": S("Calendar ID."),
       "filter": S("OData filter."), "top": LIM(50, 1000), "select": STRS("Properties."),
       "time_zone": S("Time zone for returned times.")}, ["start_date_time", "end_date_time"])

    t("UPDATE_EVENT", "write", "Changes an event's subject, time, location, body, free/busy status or categories.",
      {"event_id": ev, "subject": S("Subject."), "start": dtz("Start."), "end": dtz("End."), "location": S("Location."),
       "body": S("Body."), "show_as": show_as, "categories": STRS("Categories.")}, ["event_id"])

    t("DELETE_EVENT", "delete",
      "Removes an event from the calendar. For meetings you organize, OUTLOOK_CALENDAR_CANCEL_MEETING also notifies attendees.",
      {"event_id": ev}, ["event_id"])

    t("CANCEL_MEETING", "send", "Cancels a meeting you organize and sends a cancellation message to all attendees.",
      {"event_id": ev, "comment": S("Cancellation note.")}, ["event_id"])

    t("RESPOND_TO_INVITATION", "send",
      "Accepts, tentatively accepts or declines a meeting request, optionally proposing another time and telling the organizer.",
      {"event_id": ev, "response": E(["accept", "tentativelyAccept", "decline"], "Response."),
       "comment": S("Message to the organizer."), "send_response": B("Send the response.", default=True),
       "proposed_new_time": O({"start": dtz("Proposed start."), "end": dtz("Proposed end.")}, "Counter-proposal.",
                              req=["start", "end"])}, ["event_id", "response"])

    t("FORWARD_EVENT", "send", "Forwards a meeting invitation to additional people.",
      {"event_id": ev, "to": EMAILS("Recipients.", minItems=1), "comment": S("Note.")}, ["event_id", "to"])

    t("FIND_MEETING_TIMES", "read",
      "Suggests times when attendees (and optionally a room) are free, within working hours and a time window. "
      "The duration is ISO 8601, such as PT30M.",
      {"attendees": A(O({"email": EMAIL("Attendee."), "type": E(["required", "optional"], "Type.", default="required")},
                        "Attendee.", req=["email"]), "Attendees.", minItems=1),
       "time_constraint": O({"activity_domain": E(["work", "personal", "unrestricted"], "Hours to consider.",
                                                  default="work"),
                             "time_slots": A(O({"start": dtz("Slot start."), "end": dtz("Slot end.")}, "Window.",
                                               req=["start", "end"]), "Candidate windows.")}, "Search window."),
       "meeting_duration": S("ISO 8601 duration.", default="PT30M"),
       "max_candidates": I("Maximum suggestions.", default=10, minimum=1, maximum=50),
       "minimum_attendee_percentage": N("Minimum availability confidence.", minimum=0, maximum=100),
       "is_organizer_optional": B("Organizer need not attend.", default=False)}, ["attendees"])

    t("GET_SCHEDULE", "read",
      "Gets free/busy availability for users, distribution lists or rooms over a window, as an availability view "
      "string and detailed items.",
      {"schedules": EMAILS("Mailboxes to check.", minItems=1, maxItems=20), "start": dtz("Window start."),
       "end": dtz("Window end."),
       "availability_view_interval": I("Slot size in minutes.", default=30, minimum=5, maximum=1440)},
      ["schedules", "start", "end"])

    t("LIST_CALENDARS", "read", "Lists the user's calendars with owner, color and edit rights.")

    t("CREATE_CALENDAR", "write", "Creates a new calendar in the user's mailbox.",
      {"name": S("Calendar name."),
       "color": E(["auto", "lightBlue", "lightGreen", "lightOrange", "lightGray", "lightYellow", "lightTeal",
                   "lightPink", "lightBrown", "lightRed"], "Color.", default="auto")}, ["name"])

    t("LIST_ROOMS", "read", "Lists meeting rooms in the tenant, optionally inside one room list.",
      {"room_list_email": EMAIL("Room list address.")})

    t("ADD_EVENT_ATTACHMENT", "write", "Attaches a file to a calendar event.",
      {"event_id": ev, "name": S("File name."), "content_type": S("MIME type."),
       "content_bytes": S("Base64 content.", contentEncoding="base64")}, ["event_id", "name", "content_bytes"])


@integration("calendly", "calendar")
def _calendly(t):
    uri = lambda d: URI(d)
    pagetok = S("Page token from the previous response.")

    t("GET_CURRENT_USER", "read",
      "Returns the authenticated Calendly user with their user URI, scheduling page URL and organization URI, "
      "which most other calls need.")

    t("LIST_EVENT_TYPES", "read", "Lists a user's or organization's event types (meeting templates) and booking URLs.",
      {"user": uri("User URI."), "organization": uri("Organization URI."), "active": B("Only active types."),
       "sort": S("e.g. 'name:asc'."), "count": LIM(20, 100), "page_token": pagetok})

    t("GET_EVENT_TYPE", "read", "Fetches one event type with duration, locations and booking questions.",
      {"event_type_uuid": S("Event type UUID.")}, ["event_type_uuid"])

    t("LIST_SCHEDULED_EVENTS", "read",
      "Lists booked meetings for a user or organization, filtered by start-time window, status or invitee email.",
      {"user": uri("User URI."), "organization": uri("Organization URI."), "min_start_time": DT("From."),
       "max_start_time": DT("To."), "status": E(["active", "canceled"], "Status."), "invitee_email": EMAIL("Invitee."),
       "sort": E(["start_time:asc", "start_time:desc"], "Sort."), "count": LIM(20, 100), "page_token": pagetok})

    t("GET_SCHEDULED_EVENT", "read", "Gets one booked meeting with its location, times and host memberships.",
      {"event_uuid": S("Scheduled event UUID.")}, ["event_uuid"])

    t("LIST_EVENT_INVITEES", "read",
      "Lists invitees of a booked meeting with their answers to booking questions, UTM data and reschedule links.",
      {"event_uuid": S("Scheduled event UUID."), "status": E(["active", "canceled"], "Status."),
       "email": EMAIL("Invitee email."), "count": LIM(20, 100), "page_token": pagetok}, ["event_uuid"])

    t("CANCEL_EVENT", "send", "Cancels a booked meeting; invitees receive a cancellation email with the reason.",
      {"event_uuid": S("Scheduled event UUID."), "reason": S("Cancellation reason.")}, ["event_uuid"])

    t("CREATE_SCHEDULING_LINK", "write",
      "Generates a single-use booking link for an event type, handy for sending someone a one-off URL.",
      {"owner": uri("Event type URI."), "max_event_count": E([1], "Bookings allowed.", default=1)}, ["owner"])

    t("GET_AVAILABLE_TIMES", "read", "Lists open slots for an event type within a window of up to seven days.",
      {"event_type": uri("Event type URI."), "start_time": DT("Window start (future)."), "end_time": DT("Window end.")},
      ["event_type", "start_time", "end_time"])

    t("LIST_USER_BUSY_TIMES", "read", "Returns a user's busy blocks, both Calendly bookings and connected calendar events.",
      {"user": uri("User URI."), "start_time": DT("Window start."), "end_time": DT("Window end.")},
      ["user", "start_time", "end_time"])

    t("CREATE_WEBHOOK_SUBSCRIPTION", "write",
      "Subscribes a URL to booking events like invitee.created and invitee.canceled for a user or organization.",
      {"url": uri("Callback URL."),
       "events": A(E(["invitee.created", "invitee.canceled", "invitee_no_show.created",
                      "routing_form_submission.created"], "Event."), "Events.", minItems=1),
       "organization": uri("Organization URI."), "user": uri("User URI for user scope."),
       "scope": E(["user", "organization"], "Scope."), "signing_key": S("Secret for signature verification.")},
      ["url", "events", "organization", "scope"])

    t("LIST_WEBHOOK_SUBSCRIPTIONS", "read", "Lists webhook subscriptions for a user or organization.",
      {"organization": uri("Organization URI."), "scope": E(["user", "organization"], "Scope."), "user": uri("User URI.")},
      ["organization", "scope"])

    t("DELETE_WEBHOOK_SUBSCRIPTION", "delete", "Removes a webhook subscription.",
      {"webhook_uuid": S("Subscription UUID.")}, ["webhook_uuid"])

    t("MARK_INVITEE_NO_SHOW", "write", "Flags an invitee as a no-show for a past meeting.",
      {"invitee": uri("Invitee URI.")}, ["invitee"])

    t("INVITE_USER_TO_ORGANIZATION", "send", "Emails someone an invitation to join your Calendly organization.",
      {"organization_uuid": S("Organization UUID."), "email": EMAIL("Invitee.")}, ["organization_uuid", "email"])

    t("LIST_ORGANIZATION_MEMBERSHIPS", "read", "Lists members of an organization and their roles.",
      {"organization": uri("Organization URI."), "email": EMAIL("Filter by email."), "count": LIM(20, 100)})

    t("LIST_ROUTING_FORM_SUBMISSIONS", "read", "Lists submissions to a routing form with answers and routing results.",
      {"form": uri("Routing form URI."), "count": LIM(20, 100), "page_token": pagetok}, ["form"])

    t("CREATE_ONE_OFF_EVENT_TYPE", "write",
      "Creates a one-off meeting type for a date range and duration and returns its booking link.",
      {"name": S("Meeting name."), "host": uri("Host user URI."), "duration": I("Minutes.", minimum=1, maximum=720),
       "timezone": S("IANA time zone."),
       "date_setting": O({"type": E(["date_range"], "Type."), "start_date": DATE("First date."),
                          "end_date": DATE("Last date.")}, "Bookable dates.", req=["type", "start_date", "end_date"]),
       "location": O({"kind": E(["physical", "zoom_conference", "google_conference", "microsoft_teams_conference",
                                 "outbound_call", "inbound_call", "custom"], "Location kind."),
                      "location": S("Address or details.")}, "Where it happens.", req=["kind"])},
      ["name", "host", "duration", "date_setting"])


# ===========================================================================
# Meetings
# ===========================================================================

@integration("zoom", "meetings")
def _zoom(t):
    mid = I("Zoom meeting ID.", minimum=1)
    user = S("User ID or email; 'me' for the token owner.", default="me")

    t("CREATE_MEETING", "write",
      "Schedules a Zoom meeting and returns its join_url, start_url and passcode. Supports recurring meetings, "
      "registration and settings like waiting room, mute on entry and auto-recording.",
      {"user_id": user, "topic": S("Meeting topic.", maxLength=200),
       "type": E([1, 2, 3, 8], "1 instant, 2 scheduled, 3 recurring with no fixed time, 8 recurring with fixed time.",
                 default=2),
       "start_time": DT("Start time (for scheduled meetings)."),
       "duration": I("Length in minutes.", default=60, minimum=1),
       "timezone": S("IANA time zone, e.g. 'America/New_York'."), "agenda": S("Description.", maxLength=2000),
       "password": S("Passcode.", maxLength=10),
       "recurrence": O({"type": E([1, 2, 3], "1 daily, 2 weekly, 3 monthly."),
                        "repeat_interval": I("Repeat every N units.", minimum=1),
                        "weekly_days": S("Comma-separated days, 1=Sunday ... 7=Saturday."),
                        "monthly_day": I("Day of month.", minimum=1, maximum=31),
                        "end_times": I("Number of occurrences.", minimum=1, maximum=60),
                        "end_date_time": DT("Last occurrence.")}, "Recurrence for type 8.", req=["type"]),
       "settings": O({"host_video": B("Host video on."), "participant_video": B("Participant video on."),
                      "join_before_host": B("Allow joining before the host."), "waiting_room": B("Use waiting room."),
                      "mute_upon_entry": B("Mute on entry."),
                      "auto_recording": E(["local", "cloud", "none"], "Auto-record.", default="none"),
                      "approval_type": E([0, 1, 2], "Registration: 0 auto-approve, 1 manual, 2 none.", default=2),
                      "alternative_hosts": S("Comma-separated alternative host emails."),
                      "meeting_invitees": A(O({"email": EMAIL("Invitee.")}, "Invitee.", req=["email"]),
                                            "Invitees added to the calendar invite.")},
                     "Meeting settings.")},
      ["topic"])

    t("UPDATE_MEETING", "write", "Changes a scheduled meeting's topic, time, duration, agenda or settings.",
      {"meeting_id": mid, "topic": S("Topic."), "start_time": DT("Start."), "duration": I("Minutes.", minimum=1),
       "agenda": S("Agenda."), "settings": MAP("Settings to change, same shape as in ZOOM_CREATE_MEETING.")},
      ["meeting_id"])

    t("GET_MEETING", "read", "Gets a meeting's details, join URL, settings and recurrence occurrences.",
      {"meeting_id": mid, "occurrence_id": S("Specific occurrence.")}, ["meeting_id"])

    t("LIST_MEETINGS", "read", "Lists a user's scheduled, live, upcoming or previous meetings.",
      {"user_id": user, "type": E(["scheduled", "live", "upcoming", "upcoming_meetings", "previous_meetings"], "Which.",
                                  default="upcoming"),
       "from": DATE("From date."), "to": DATE("To date."), "page_size": LIM(30, 300),
       "next_page_token": S("Next page token.")})

    t("DELETE_MEETING", "delete", "Deletes a meeting or one occurrence, optionally emailing registrants.",
      {"meeting_id": mid, "occurrence_id": S("Occurrence to delete."),
       "cancel_meeting_reminder": B("Email registrants about the cancellation.", default=False)}, ["meeting_id"])

    t("END_MEETING", "write", "Ends a meeting that is in progress for everyone.", {"meeting_id": mid}, ["meeting_id"])

    t("ADD_MEETING_REGISTRANT", "write",
      "Registers someone for a meeting with registration enabled and returns their personal join URL.",
      {"meeting_id": mid, "email": EMAIL("Registrant email."), "first_name": S("First name."), "last_name": S("Last name."),
       "custom_questions": A(O({"title": S("Question."), "value": S("Answer.")}, "Answer.", req=["title", "value"]),
                             "Answers to custom questions.")}, ["meeting_id", "email", "first_name"])

    t("LIST_MEETING_REGISTRANTS", "read", "Lists a meeting's registrants by approval status.",
      {"meeting_id": mid, "status": E(["pending", "approved", "denied"], "Status.", default="approved"),
       "page_size": LIM(30, 300)}, ["meeting_id"])

    t("UPDATE_REGISTRANT_STATUS", "write", "Approves, denies or cancels meeting registrants.",
      {"meeting_id": mid, "action": E(["approve", "deny", "cancel"], "Action."),
       "registrants": A(O({"id": S("Registrant ID."), "email": EMAIL("Registrant email.")}, "Registrant."),
                        "Registrants.", minItems=1)}, ["meeting_id", "action", "registrants"])

    t("GET_PAST_MEETING_PARTICIPANTS", "read", "Lists who attended a past meeting, with join and leave times.",
      {"meeting_uuid": S("Meeting UUID; double-encode UUIDs starting with '/' or containing '//'."),
       "page_size": LIM(30, 300)}, ["meeting_uuid"])

    t("LIST_RECORDINGS", "read",
      "Lists a user's cloud recordings across a date range (up to a month per request) with download links "
      "for video, audio and transcripts.",
      {"user_id": user, "from": DATE("From."), "to": DATE("To."), "page_size": LIM(30, 300),
       "next_page_token": S("Next page token."), "trash": B("List trashed recordings.", default=False)})

    t("GET_MEETING_RECORDINGS", "read", "Gets the recording files of one meeting.",
      {"meeting_id": S("Meeting ID or UUID."), "include_download_access_token": B("Include a download token.",
                                                                                  default=False)}, ["meeting_id"])

    t("DELETE_RECORDING", "delete", "Moves a meeting's recordings to trash or deletes them permanently.",
      {"meeting_id": S("Meeting ID or UUID."), "action": E(["trash", "delete"], "Trash or delete.", default="trash")},
      ["meeting_id"])

    t("GET_MEETING_SUMMARY", "read",
      "Retrieves the AI Companion summary (overview and next steps) of an ended meeting, if summaries were on.",
      {"meeting_uuid": S("Meeting UUID.")}, ["meeting_uuid"])

    t("CREATE_WEBINAR", "write", "Schedules a webinar with registration and panelist settings.",
      {"user_id": user, "topic": S("Topic."), "start_time": DT("Start."), "duration": I("Minutes.", minimum=1),
       "timezone": S("Time zone."), "agenda": S("Agenda."),
       "type": E([5, 6, 9], "5 webinar, 6 recurring without fixed time, 9 recurring with fixed time.", default=5),
       "settings": O({"approval_type": E([0, 1, 2], "Registration approval."),
                      "registrants_email_notification": B("Email registrants."),
                      "panelists_video": B("Panelist video."), "practice_session": B("Practice session."),
                      "auto_recording": E(["local", "cloud", "none"], "Auto-record.")}, "Webinar settings.")},
      ["topic"])

    t("LIST_WEBINARS", "read", "Lists the webinars scheduled by a Zoom user, with start times and join links.", {"user_id": user, "page_size": LIM(30, 300)})

    t("ADD_WEBINAR_PANELISTS", "send", "Adds panelists to a webinar; Zoom emails each one a personal join link.",
      {"webinar_id": I("Webinar ID.", minimum=1),
       "panelists": A(O({"name": S("Name."), "email": EMAIL("Email.")}, "Panelist.", req=["name", "email"]),
                      "Panelists.", minItems=1)}, ["webinar_id", "panelists"])

    t("SEND_CHAT_MESSAGE", "send",
      "Sends a Zoom Team Chat message to a contact (by email) or into a chat channel.",
      {"message": S("Message text."), "to_contact": EMAIL("Recipient contact."), "to_channel": S("Channel ID."),
       "reply_main_message_id": S("Reply in this message's thread.")}, ["message"], category="messaging")

    t("LIST_USERS", "read", "Lists users on the Zoom account.",
      {"status": E(["active", "inactive", "pending"], "Status.", default="active"), "page_size": LIM(30, 300),
       "role_id": S("Role filter.")})


# ===========================================================================
# Payments
# ===========================================================================

@integration("stripe", "payments")
def _stripe(t):
    amount = lambda d="Amount in the smallest currency unit, e.g. 1999 for $19.99 (zero-decimal currencies like JPY use whole units).": I(d, minimum=0)
    cur = S("Three-letter ISO currency code in lowercase, e.g. 'usd'.", pattern=r"^[a-z]{3}$")
    meta = MAP("Up to 50 key/value pairs stored on the object for your own use.", "string")
    lim = LIM(10, 100, "Number of objects to return.")
    after = S("Cursor: an object ID to start after.")
    cus = S("Customer ID (cus_...).")
    address = O({"line1": S("Line 1."), "line2": S("Line 2."), "city": S("City."), "state": S("State/region."),
                 "postal_code": S("Postal code."), "country": S("Two-letter ISO country code.")}, "Address.")
    line_items = A(O({"price": S("Price ID (price_...)."), "quantity": I("Quantity.", minimum=1)}, "Line item.",
                     req=["price", "quantity"]), "Items to sell.", minItems=1)

    t("CREATE_CUSTOMER", "write",
      "Creates a Stripe customer to reuse payment methods and group payments, invoices and subscriptions.",
      {"email": EMAIL("Email."), "name": S("Full name or business name."), "phone": S("Phone."),
       "description": S("Internal description."), "address": address,
       "payment_method": S("PaymentMethod ID (pm_...) to attach."),
       "invoice_settings": O({"default_payment_method": S("Default PaymentMethod for invoices.")}, "Invoice defaults."),
       "tax_exempt": E(["none", "exempt", "reverse"], "Tax status.", default="none"),
       "preferred_locales": STRS("Locales for emails and invoices."), "metadata": meta})

    t("UPDATE_CUSTOMER", "write", "Updates a customer's contact details, default payment method or metadata.",
      {"customer_id": cus, "email": EMAIL("Email."), "name": S("Name."), "phone": S("Phone."),
       "description": S("Description."), "address": address,
       "default_payment_method": S("Default PaymentMethod for invoices and subscriptions."), "metadata": meta},
      ["customer_id"])

    t("GET_CUSTOMER", "read", "Retrieves a customer, optionally expanding related objects.",
      {"customer_id": cus, "expand": STRS("Fields to expand, e.g. ['subscriptions', 'invoice_settings.default_payment_method'].")},
      ["customer_id"])

    t("LIST_CUSTOMERS", "read", "Lists customers, newest first, optionally by exact email.",
      {"email": EMAIL("Exact email."), "created_gte": I("Created at or after (Unix seconds).", minimum=0),
       "limit": lim, "starting_after": after})

    t("SEARCH_CUSTOMERS", "read",
      "Searches customers with Stripe's search query language, e.g. email:'jane@example.com' or "
      "metadata['crm_id']:'0015g00000'. Results can lag recent writes by about a minute.",
      {"query": S("Search query."), "limit": lim, "page": S("Page cursor from next_page.")}, ["query"])

    t("DELETE_CUSTOMER", "delete",
      "Permanently deletes a customer and immediately cancels their active subscriptions.",
      {"customer_id": cus}, ["customer_id"])

    t("CREATE_PAYMENT_INTENT", "write",
      "Creates a PaymentIntent to collect a payment. Confirm it straight away with confirm=true and a "
      "payment_method, or hand its client_secret to your frontend. capture_method=manual authorizes now and "
      "captures later.",
      {"amount": amount(), "currency": cur, "customer": cus,
       "payment_method": S("PaymentMethod ID to charge."),
       "payment_method_types": STRS("Allowed types, e.g. ['card', 'us_bank_account']; omit to use automatic methods."),
       "automatic_payment_methods": O({"enabled": B("Let Stripe pick methods from Dashboard settings."),
                                       "allow_redirects": E(["always", "never"], "Allow redirect-based methods.",
                                                            default="always")},
                                      "Automatic payment methods.", req=["enabled"]),
       "confirm": B("Confirm immediately.", default=False),
       "off_session": B("Customer is not present (requires confirm).", default=False),
       "capture_method": E(["automatic", "automatic_async", "manual"], "When funds are captured.", default="automatic_async"),
       "setup_future_usage": E(["on_session", "off_session"], "Save the method for later."),
       "description": S("Description."), "receipt_email": EMAIL("Send a receipt here."),
       "statement_descriptor_suffix": S("Suffix on the card statement.", maxLength=22),
       "shipping": O({"name": S("Recipient."), "phone": S("Phone."), "address": address}, "Shipping details.",
                     req=["name", "address"]),
       "application_fee_amount": I("Connect platform fee.", minimum=0),
       "transfer_data": O({"destination": S("Connected account ID (acct_...).")}, "Destination charge.",
                          req=["destination"]),
       "metadata": meta},
      ["amount", "currency"])

    t("CONFIRM_PAYMENT_INTENT", "write", "Confirms a PaymentIntent, attempting the charge with the given payment method.",
      {"payment_intent_id": S("PaymentIntent ID (pi_...)."), "payment_method": S("PaymentMethod ID."),
       "return_url": URI("Where to send the customer after redirect-based authentication."),
       "off_session": B("Customer not present.", default=False)}, ["payment_intent_id"])

    t("CAPTURE_PAYMENT_INTENT", "write",
      "Captures an authorized PaymentIntent (capture_method=manual), possibly for less than was authorized.",
      {"payment_intent_id": S("PaymentIntent ID."), "amount_to_capture": amount("Amount to capture; everything if omitted.")},
      ["payment_intent_id"])

    t("CANCEL_PAYMENT_INTENT", "write", "Cancels a PaymentIntent that hasn't succeeded, releasing any authorization.",
      {"payment_intent_id": S("PaymentIntent ID."),
       "cancellation_reason": E(["duplicate", "fraudulent", "requested_by_customer", "abandoned"], "Reason.")},
      ["payment_intent_id"])

    t("LIST_PAYMENT_INTENTS", "read", "Lists PaymentIntents, optionally for one customer or since a date.",
      {"customer": cus, "created_gte": I("Created at or after (Unix seconds).", minimum=0), "limit": lim,
       "starting_after": after})

    t("CREATE_REFUND", "send",
      "Refunds a payment in full or in part; the money goes back to the customer's original payment method.",
      {"payment_intent": S("PaymentIntent to refund."), "charge": S("Charge to refund (alternative)."),
       "amount": amount("Amount to refund; full amount if omitted."),
       "reason": E(["duplicate", "fraudulent", "requested_by_customer"], "Reason."), "metadata": meta})

    t("CREATE_INVOICE", "write",
      "Creates a draft invoice for a customer that picks up pending invoice items. With send_invoice collection "
      "the customer pays from an emailed link; charge_automatically bills the saved payment method.",
      {"customer": cus, "collection_method": E(["charge_automatically", "send_invoice"], "Collection.",
                                               default="charge_automatically"),
       "days_until_due": I("Days to pay (send_invoice only).", minimum=0), "description": S("Memo."),
       "auto_advance": B("Let Stripe finalize automatically.", default=True),
       "pending_invoice_items_behavior": E(["include", "exclude"], "Pull in pending items.", default="include"),
       "footer": S("Footer text."), "metadata": meta}, ["customer"])

    t("CREATE_INVOICE_ITEM", "write", "Adds a line to a customer's upcoming invoice or to a specific draft invoice.",
      {"customer": cus, "invoice": S("Draft invoice ID."), "price": S("Price ID."), "quantity": I("Quantity.", minimum=1),
       "amount": amount("Custom amount instead of a price."), "currency": cur, "description": S("Line description.")},
      ["customer"])

    t("FINALIZE_INVOICE", "write", "Finalizes a draft invoice so it can be paid or sent.",
      {"invoice_id": S("Invoice ID (in_...)."), "auto_advance": B("Continue automatic collection.")}, ["invoice_id"])

    t("SEND_INVOICE", "send", "Emails a finalized invoice to the customer with a link to the hosted payment page.",
      {"invoice_id": S("Invoice ID.")}, ["invoice_id"])

    t("VOID_INVOICE", "delete",
      "Voids a finalized, unpaid invoice so it can never be paid. This is permanent.",
      {"invoice_id": S("Invoice ID.")}, ["invoice_id"])

    t("LIST_INVOICES", "read", "Lists invoices by customer, status or subscription.",
      {"customer": cus, "status": E(["draft", "open", "paid", "uncollectible", "void"], "Status."),
       "subscription": S("Subscription ID."), "limit": lim, "starting_after": after})

    t("CREATE_SUBSCRIPTION", "write",
      "Starts a subscription for a customer on one or more recurring prices, with optional trial and proration rules.",
      {"customer": cus,
       "items": A(O({"price": S("Recurring price ID."), "quantity": I("Quantity.", minimum=1, default=1)},
                    "Subscription item.", req=["price"]), "Prices to subscribe to.", minItems=1, maxItems=20),
       "default_payment_method": S("PaymentMethod ID."), "trial_period_days": I("Trial length.", minimum=0),
       "payment_behavior": E(["allow_incomplete", "default_incomplete", "error_if_incomplete", "pending_if_incomplete"],
                             "What to do if the first payment needs action.", default="allow_incomplete"),
       "proration_behavior": E(["create_prorations", "none", "always_invoice"], "Proration.",
                               default="create_prorations"),
       "cancel_at_period_end": B("Cancel at the end of the first period.", default=False),
       "collection_method": E(["charge_automatically", "send_invoice"], "Collection.", default="charge_automatically"),
       "metadata": meta}, ["customer", "items"])

    t("UPDATE_SUBSCRIPTION", "write",
      "Changes a subscription: swap prices or quantities, schedule cancellation at period end, or pause collection.",
      {"subscription_id": S("Subscription ID (sub_...)."),
       "items": A(O({"id": S("Existing subscription item ID."), "price": S("New price."),
                     "quantity": I("Quantity.", minimum=0), "deleted": B("Remove this item.")}, "Item change."),
                  "Item changes."),
       "cancel_at_period_end": B("Cancel when the period ends."),
       "proration_behavior": E(["create_prorations", "none", "always_invoice"], "Proration."),
       "pause_collection": O({"behavior": E(["keep_as_draft", "mark_uncollectible", "void"], "What happens to invoices.")},
                             "Pause payment collection.", req=["behavior"])}, ["subscription_id"])

    t("CANCEL_SUBSCRIPTION", "delete",
      "Cancels a subscription immediately. To stop at the end of the period instead, set cancel_at_period_end "
      "with STRIPE_UPDATE_SUBSCRIPTION.",
      {"subscription_id": S("Subscription ID."), "invoice_now": B("Invoice pending usage now.", default=False),
       "prorate": B("Credit unused time.", default=False)}, ["subscription_id"])

    t("CREATE_PRODUCT", "write", "Creates a product, optionally with a default price in one step.",
      {"name": S("Product name."), "description": S("Description."), "active": B("Available for sale.", default=True),
       "images": A({"type": "string", "format": "uri"}, "Image URLs.", maxItems=8),
       "default_price_data": O({"unit_amount": amount(), "currency": cur,
                                "recurring": O({"interval": E(["day", "week", "month", "year"], "Interval."),
                                                "interval_count": I("Intervals between bills.", minimum=1)},
                                               "Make it recurring.", req=["interval"])},
                               "Default price.", req=["currency"]),
       "tax_code": S("Stripe Tax code."), "metadata": meta}, ["name"])

    t("CREATE_PRICE", "write", "Creates a one-time or recurring price for a product.",
      {"product": S("Product ID (prod_...)."), "unit_amount": amount(), "currency": cur,
       "recurring": O({"interval": E(["day", "week", "month", "year"], "Interval."),
                       "interval_count": I("Intervals between bills.", minimum=1, default=1),
                       "usage_type": E(["licensed", "metered"], "Usage type.", default="licensed")},
                      "Recurring settings.", req=["interval"]),
       "lookup_key": S("Stable key to fetch the price by."), "nickname": S("Internal name."),
       "tax_behavior": E(["inclusive", "exclusive", "unspecified"], "Tax behavior.")}, ["product", "currency"])

    t("CREATE_CHECKOUT_SESSION", "write",
      "Creates a Stripe Checkout Session and returns the hosted page URL to send a customer to for a one-time "
      "payment, a subscription or saving a card.",
      {"mode": E(["payment", "subscription", "setup"], "Checkout mode."), "line_items": line_items,
       "success_url": URI("Redirect after success."), "cancel_url": URI("Redirect if the customer backs out."),
       "customer": cus, "customer_email": EMAIL("Prefill email."),
       "allow_promotion_codes": B("Show a promo code field.", default=False),
       "client_reference_id": S("Your own reference."), "metadata": meta}, ["mode", "success_url"])

    t("CREATE_PAYMENT_LINK", "write", "Creates a shareable Payment Link for fixed items, reusable by any number of customers.",
      {"line_items": line_items, "after_completion_redirect_url": URI("Redirect after payment."),
       "allow_promotion_codes": B("Allow promo codes.", default=False), "metadata": meta}, ["line_items"])

    t("CREATE_TRANSFER", "send",
      "Moves funds from your platform balance to a connected account (Connect), such as a marketplace seller's payout share.",
      {"amount": amount(), "currency": cur, "destination": S("Connected account ID (acct_...)."),
       "transfer_group": S("Group tying related charges and transfers."),
       "source_transaction": S("Charge to fund the transfer from."), "description": S("Description."),
       "metadata": meta}, ["amount", "currency", "destination"])

    t("GET_BALANCE", "read", "Shows the available and pending balance per currency.")

    t("LIST_BALANCE_TRANSACTIONS", "read", "Lists the transactions that moved the balance: charges, refunds, fees, payouts.",
      {"type": E(["charge", "refund", "adjustment", "payout", "transfer", "stripe_fee", "application_fee"], "Type."),
       "payout": S("Only transactions in this payout."), "created_gte": I("Since (Unix seconds).", minimum=0),
       "limit": lim, "starting_after": after})


@integration("paypal", "payments")
def _paypal(t):
    money = lambda d="Money amount.": O({"currency_code": S("ISO 4217 code, e.g. 'USD'.", pattern=r"^[A-Z]{3}$"),
                                         "value": S("Decimal string, e.g. '19.99'.", pattern=r"^\d+(\.\d{1,2})?$")},
                                        d, req=["currency_code", "value"])
    psize = LIM(20, 100, "Items per page.")

    t("CREATE_ORDER", "write",
      "Creates a PayPal Checkout order with one or more purchase units. Send the buyer to the returned approve "
      "link, then capture or authorize the order after they approve.",
      {"intent": E(["CAPTURE", "AUTHORIZE"], "Capture immediately after approval, or authorize first."),
       "purchase_units": A(O({
           "reference_id": S("Your ID for the unit."), "description": S("Description.", maxLength=127),
           "custom_id": S("Reconciliation ID."), "invoice_id": S("Your invoice number."),
           "amount": O({"currency_code": S("Currency.", pattern=r"^[A-Z]{3}$"), "value": S("Total, e.g. '49.00'."),
                        "breakdown": O({"item_total": money("Sum of items."), "shipping": money("Shipping."),
                                        "tax_total": money("Tax.")}, "Amount breakdown.")},
                       "Total amount.", req=["currency_code", "value"]),
           "items": A(O({"name": S("Item name."), "quantity": S("Quantity as a string."), "unit_amount": money("Unit price."),
                         "sku": S("SKU."),
                         "category": E(["DIGITAL_GOODS", "PHYSICAL_GOODS", "DONATION"], "Item category.")},
                        "Line item.", req=["name", "quantity", "unit_amount"]), "Items."),
           "shipping": O({"name": S("Recipient full name."),
                          "address": O({"address_line_1": S("Street."), "admin_area_2": S("City."),
                                        "admin_area_1": S("State."), "postal_code": S("Postal code."),
                                        "country_code": S("Two-letter country.")}, "Address.",
                                       req=["country_code"])}, "Shipping."),
       }, "Purchase unit.", req=["amount"]), "What the buyer pays for.", minItems=1, maxItems=10),
       "return_url": URI("Where PayPal sends the buyer after approval."),
       "cancel_url": URI("Where the buyer goes if they cancel."),
       "brand_name": S("Name shown on the PayPal page."),
       "shipping_preference": E(["GET_FROM_FILE", "NO_SHIPPING", "SET_PROVIDED_ADDRESS"], "Shipping address source."),
       "user_action": E(["CONTINUE", "PAY_NOW"], "Button label on PayPal.", default="CONTINUE")},
      ["intent", "purchase_units"])

    t("GET_ORDER", "read", "Shows an order's status, payer and purchase units.",
      {"order_id": S("Order ID.")}, ["order_id"])

    t("CAPTURE_ORDER", "write", "Captures payment for an approved order, moving the funds into your account.",
      {"order_id": S("Order ID."), "request_id": S("Idempotency key (PayPal-Request-Id).")}, ["order_id"])

    t("AUTHORIZE_ORDER", "write", "Authorizes an approved order, holding funds for later capture.",
      {"order_id": S("Order ID.")}, ["order_id"])

    t("CAPTURE_AUTHORIZATION", "write", "Captures all or part of an authorized payment.",
      {"authorization_id": S("Authorization ID."), "amount": money("Amount; full if omitted."),
       "final_capture": B("No further captures will follow.", default=True), "invoice_id": S("Invoice number."),
       "note_to_payer": S("Note shown to the buyer.")}, ["authorization_id"])

    t("REFUND_CAPTURE", "send", "Refunds a captured payment to the buyer, fully or partially, with an optional note.",
      {"capture_id": S("Capture ID."), "amount": money("Refund amount; full if omitted."),
       "note_to_payer": S("Reason shown to the buyer.", maxLength=255), "invoice_id": S("Invoice number.")},
      ["capture_id"])

    t("CREATE_PAYOUT", "send",
      "Sends money to one or many recipients by email, phone or PayPal ID in a single payouts batch, with the "
      "subject and message they will receive.",
      {"sender_batch_id": S("Your unique batch ID (prevents duplicates)."),
       "email_subject": S("Subject of the notification."), "email_message": S("Message in the notification."),
       "items": A(O({"recipient_type": E(["EMAIL", "PHONE", "PAYPAL_ID"], "Receiver type.", default="EMAIL"),
                     "receiver": S("Email, phone or PayPal ID."), "amount": money("Amount to send."),
                     "note": S("Note for this recipient."), "sender_item_id": S("Your ID for this item.")},
                    "Payout item.", req=["receiver", "amount"]), "Recipients.", minItems=1, maxItems=15000)},
      ["sender_batch_id", "items"])

    t("GET_PAYOUT_BATCH", "read", "Shows a payouts batch with the status of each item.",
      {"payout_batch_id": S("Batch ID."), "page_size": psize, "page": I("Page.", default=1, minimum=1)},
      ["payout_batch_id"])

    t("CREATE_INVOICE", "write",
      "Creates a draft invoice with line items, recipient and payment terms. Nothing is delivered until PAYPAL_SEND_INVOICE.",
      {"invoice_number": S("Invoice number."), "currency_code": S("Currency.", pattern=r"^[A-Z]{3}$"),
       "recipient_email": EMAIL("Bill-to email."),
       "recipient_name": O({"given_name": S("First name."), "surname": S("Last name.")}, "Bill-to name."),
       "items": A(O({"name": S("Item."), "quantity": S("Quantity."), "unit_amount": money("Unit price."),
                     "description": S("Description."),
                     "tax": O({"name": S("Tax name."), "percent": S("Tax percent, e.g. '8.25'.")}, "Tax.")},
                    "Invoice item.", req=["name", "quantity", "unit_amount"]), "Items.", minItems=1),
       "note": S("Note to recipient."), "terms_and_conditions": S("Terms."),
       "payment_term": E(["DUE_ON_RECEIPT", "NET_10", "NET_15", "NET_30", "NET_45", "NET_60", "NET_90"], "Terms."),
       "due_date": DATE("Due date.")}, ["currency_code", "items"])

    t("SEND_INVOICE", "send", "Sends a draft invoice to the recipient by email.",
      {"invoice_id": S("Invoice ID."), "subject": S("Email subject."), "note": S("Email note."),
       "send_to_invoicer": B("Copy yourself.", default=False),
       "send_to_recipient": B("Email the recipient.", default=True)}, ["invoice_id"])

    t("SEND_INVOICE_REMINDER", "send", "Emails a payment reminder for an unpaid invoice.",
      {"invoice_id": S("Invoice ID."), "subject": S("Subject."), "note": S("Note.")}, ["invoice_id"])

    t("LIST_INVOICES", "read", "Lists PayPal invoices you have created, newest first, with status and amounts due.",
      {"page": I("Page.", default=1, minimum=1), "page_size": psize,
       "total_required": B("Include total counts.", default=False)})

    t("CANCEL_INVOICE", "write", "Cancels a sent invoice so it can no longer be paid, optionally notifying the recipient.",
      {"invoice_id": S("Invoice ID."), "note": S("Cancellation note."),
       "send_to_recipient": B("Notify the recipient.", default=True)}, ["invoice_id"])

    t("DELETE_DRAFT_INVOICE", "delete", "Deletes a draft or scheduled invoice that has not been sent.",
      {"invoice_id": S("Invoice ID.")}, ["invoice_id"])

    t("LIST_TRANSACTIONS", "read",
      "Searches the account's transaction history for a window of up to 31 days; new transactions can take a few hours to appear.",
      {"start_date": DT("Window start."), "end_date": DT("Window end."), "transaction_id": S("Specific transaction."),
       "transaction_status": E(["D", "P", "S", "V"], "D denied, P pending, S success, V reversed."),
       "fields": S("Field groups, e.g. 'transaction_info,payer_info'.", default="transaction_info"),
       "page_size": LIM(100, 500), "page": I("Page.", default=1, minimum=1)}, ["start_date", "end_date"])

    t("GET_BALANCES", "read", "Returns the account balance per currency, optionally at a past point in time.",
      {"as_of_time": DT("Balance as of this time."), "currency_code": S("Only this currency.")})

    t("CREATE_PRODUCT", "write", "Adds a catalog product, needed before creating subscription plans.",
      {"name": S("Product name."), "type": E(["PHYSICAL", "DIGITAL", "SERVICE"], "Product type."),
       "description": S("Description."), "category": S("Category, e.g. 'SOFTWARE'."), "image_url": URI("Image."),
       "home_url": URI("Product page.")}, ["name", "type"])

    t("CREATE_BILLING_PLAN", "write", "Creates a subscription plan with trial and regular billing cycles for a product.",
      {"product_id": S("Catalog product ID."), "name": S("Plan name."), "description": S("Description."),
       "billing_cycles": A(O({
           "frequency": O({"interval_unit": E(["DAY", "WEEK", "MONTH", "YEAR"], "Unit."),
                           "interval_count": I("Units per cycle.", minimum=1, default=1)}, "Frequency.",
                          req=["interval_unit"]),
           "tenure_type": E(["REGULAR", "TRIAL"], "Cycle type."),
           "sequence": I("Order of the cycle.", minimum=1),
           "total_cycles": I("Number of cycles; 0 means until cancelled.", minimum=0),
           "pricing_scheme": O({"fixed_price": money("Price per cycle.")}, "Pricing."),
       }, "Billing cycle.", req=["frequency", "tenure_type", "sequence"]), "Cycles.", minItems=1),
       "payment_preferences": O({"auto_bill_outstanding": B("Retry outstanding amounts.", default=True),
                                 "setup_fee": money("One-time setup fee."),
                                 "payment_failure_threshold": I("Failures before suspension.", minimum=0)},
                                "Payment preferences."),
       "status": E(["CREATED", "ACTIVE"], "Initial status.", default="ACTIVE")},
      ["product_id", "name", "billing_cycles"])

    t("CREATE_SUBSCRIPTION", "write",
      "Creates a subscription to a billing plan and returns the approval link the subscriber must visit.",
      {"plan_id": S("Billing plan ID."),
       "subscriber": O({"email_address": EMAIL("Email."),
                        "name": O({"given_name": S("First name."), "surname": S("Last name.")}, "Name.")},
                       "Subscriber."),
       "start_time": DT("Start."), "quantity": S("Quantity."), "custom_id": S("Your reference."),
       "return_url": URI("After approval."), "cancel_url": URI("If cancelled.")}, ["plan_id"])

    t("GET_SUBSCRIPTION", "read", "Shows a subscription's status, plan, next billing time and last payment.",
      {"subscription_id": S("Subscription ID.")}, ["subscription_id"])

    t("CANCEL_SUBSCRIPTION", "delete", "Cancels a subscription permanently.",
      {"subscription_id": S("Subscription ID."), "reason": S("Reason.")}, ["subscription_id", "reason"])

    t("LIST_DISPUTES", "read", "Lists disputes and claims filed by buyers, by state or transaction.",
      {"start_time": DT("Created after."), "disputed_transaction_id": S("Transaction ID."),
       "dispute_state": E(["REQUIRED_ACTION", "REQUIRED_OTHER_PARTY_ACTION", "UNDER_PAYPAL_REVIEW", "RESOLVED",
                           "OPEN_INQUIRIES", "APPEALABLE"], "State."), "page_size": LIM(10, 50)})

    t("ACCEPT_DISPUTE_CLAIM", "send", "Accepts liability for a dispute, which refunds the buyer.",
      {"dispute_id": S("Dispute ID."), "note": S("Note to PayPal and the buyer."),
       "accept_claim_reason": E(["DID_NOT_SHIP_ITEM", "TOO_TIME_CONSUMING", "LOST_IN_MAIL", "NOT_ABLE_TO_WIN",
                                 "COMPANY_POLICY", "REASON_NOT_SET"], "Reason."),
       "refund_amount": money("Amount to refund.")}, ["dispute_id", "note"])


# ===========================================================================
# Accounting
# ===========================================================================

@integration("quickbooks", "accounting")
def _quickbooks(t):
    ref = lambda d: O({"value": S("Entity ID."), "name": S("Display name (informational).")}, d, req=["value"])
    addr = O({"line1": S("Line 1."), "city": S("City."), "country_sub_division_code": S("State/province code."),
              "postal_code": S("Postal code."), "country": S("Country.")}, "Address.")
    simple_lines = A(O({"amount": N("Line amount."), "description": S("Description."), "item_ref": ref("Product/service."),
                        "quantity": N("Quantity."), "unit_price": N("Rate.")}, "Line.", req=["amount", "item_ref"]),
                     "Lines.", minItems=1)
    acct_method = E(["Cash", "Accrual"], "Accounting basis.", default="Accrual")

    t("QUERY", "read",
      "Runs a QuickBooks Online query in its SQL-like language, e.g. SELECT * FROM Invoice WHERE Balance > '0' "
      "ORDERBY TxnDate DESC. Joins aren't supported; page with STARTPOSITION and MAXRESULTS (up to 1000).",
      {"query": S("Query statement."), "minor_version": S("API minor version, e.g. '70'.")}, ["query"])

    t("CREATE_INVOICE", "write",
      "Creates a customer invoice with product/service lines, dates, terms, billing email and memo. "
      "Sales tax follows the company's tax settings unless tax codes are set per line.",
      {"customer_ref": ref("Customer being billed."),
       "line_items": A(O({"amount": N("Line total."), "description": S("Description."),
                          "item_ref": ref("Product or service item."), "quantity": N("Quantity."),
                          "unit_price": N("Rate."), "tax_code_ref": ref("Tax code, e.g. 'TAX' or 'NON' in US companies."),
                          "service_date": DATE("Service date."), "class_ref": ref("Class for tracking.")},
                         "Sales line (SalesItemLineDetail).", req=["amount", "item_ref"]), "Invoice lines.", minItems=1),
       "txn_date": DATE("Invoice date."), "due_date": DATE("Due date."), "doc_number": S("Invoice number."),
       "bill_email": EMAIL("Where the invoice is emailed."), "customer_memo": S("Message on the invoice.", maxLength=1000),
       "sales_term_ref": ref("Payment terms, e.g. Net 30."), "ship_address": addr,
       "allow_online_credit_card_payment": B("Accept cards online.", default=False),
       "allow_online_ach_payment": B("Accept bank transfers online.", default=False),
       "currency_ref": ref("Currency for multicurrency companies."),
       "custom_fields": A(O({"definition_id": S("Custom field definition ID."), "string_value": S("Value.")},
                            "Custom field.", req=["definition_id", "string_value"]), "Custom fields.", maxItems=3)},
      ["customer_ref", "line_items"])

    t("GET_INVOICE", "read", "Reads an invoice with lines, balance and SyncToken.",
      {"invoice_id": S("Invoice ID.")}, ["invoice_id"])

    t("UPDATE_INVOICE", "write",
      "Sparse-updates an invoice. QuickBooks needs the current SyncToken to avoid overwriting someone else's edit.",
      {"invoice_id": S("Invoice ID."), "sync_token": S("Current SyncToken."), "due_date": DATE("Due date."),
       "customer_memo": S("Memo."), "bill_email": EMAIL("Billing email."), "private_note": S("Internal note.")},
      ["invoice_id", "sync_token"])

    t("SEND_INVOICE", "send",
      "Emails an invoice to the customer (BillEmail on file, or an address you give), with a pay-online link if enabled.",
      {"invoice_id": S("Invoice ID."), "send_to": EMAIL("Override recipient.")}, ["invoice_id"])

    t("VOID_INVOICE", "delete",
      "Voids an invoice: amounts go to zero but the transaction stays on record, marked Voided.",
      {"invoice_id": S("Invoice ID."), "sync_token": S("SyncToken.")}, ["invoice_id", "sync_token"])

    t("DELETE_INVOICE", "delete", "Deletes an invoice entirely; void it instead if you need an audit trail.",
      {"invoice_id": S("Invoice ID."), "sync_token": S("SyncToken.")}, ["invoice_id", "sync_token"])

    t("CREATE_CUSTOMER", "write", "Adds a customer (or a sub-customer/job under a parent).",
      {"display_name": S("Unique display name."), "given_name": S("First name."), "family_name": S("Last name."),
       "company_name": S("Company."), "primary_email": EMAIL("Email."), "primary_phone": S("Phone."),
       "billing_address": addr, "notes": S("Notes."), "taxable": B("Taxable.", default=True),
       "parent_ref": ref("Parent customer, making this a sub-customer.")}, ["display_name"])

    t("CREATE_VENDOR", "write", "Adds a vendor (supplier) with contact details, terms and 1099 tracking.",
      {"display_name": S("Display name."), "company_name": S("Company."), "primary_email": EMAIL("Email."),
       "primary_phone": S("Phone."), "bill_address": addr, "tax_identifier": S("Tax ID."),
       "term_ref": ref("Default terms."), "vendor_1099": B("Track for 1099.", default=False)}, ["display_name"])

    t("CREATE_BILL", "write", "Records a vendor bill (accounts payable), split across expense accounts or items.",
      {"vendor_ref": ref("Vendor."),
       "line_items": A(O({"amount": N("Amount."), "description": S("Description."),
                          "detail_type": E(["AccountBasedExpenseLineDetail", "ItemBasedExpenseLineDetail"], "Line kind."),
                          "account_ref": ref("Expense account."), "item_ref": ref("Item."),
                          "customer_ref": ref("Billable customer."), "billable": B("Billable to customer.")},
                         "Bill line.", req=["amount", "detail_type"]), "Lines.", minItems=1),
       "txn_date": DATE("Bill date."), "due_date": DATE("Due date."), "doc_number": S("Vendor ref number."),
       "ap_account_ref": ref("Accounts payable account."), "private_note": S("Memo.")}, ["vendor_ref", "line_items"])

    t("CREATE_BILL_PAYMENT", "write", "Records paying one or more open bills from a bank account or credit card.",
      {"vendor_ref": ref("Vendor."), "pay_type": E(["Check", "CreditCard"], "Payment type."),
       "bank_account_ref": ref("Bank account (checks)."), "cc_account_ref": ref("Credit card account."),
       "total_amt": N("Total paid.", minimum=0),
       "bills": A(O({"bill_id": S("Bill ID."), "amount": N("Amount applied.")}, "Bill applied.",
                    req=["bill_id", "amount"]), "Bills paid.", minItems=1), "txn_date": DATE("Payment date.")},
      ["vendor_ref", "pay_type", "total_amt", "bills"])

    t("RECEIVE_PAYMENT", "write",
      "Records a customer payment and applies it to open invoices; whatever is unapplied becomes a credit.",
      {"customer_ref": ref("Customer."), "total_amt": N("Amount received.", minimum=0),
       "invoices": A(O({"invoice_id": S("Invoice."), "amount": N("Amount applied.")}, "Application.",
                       req=["invoice_id", "amount"]), "Invoices to apply to."),
       "payment_method_ref": ref("Payment method."), "deposit_to_account_ref": ref("Deposit account."),
       "txn_date": DATE("Date."), "payment_ref_num": S("Check or reference number.")},
      ["customer_ref", "total_amt"])

    t("CREATE_ESTIMATE", "write", "Creates an estimate (quote) for a customer.",
      {"customer_ref": ref("Customer."), "line_items": simple_lines, "txn_date": DATE("Date."),
       "expiration_date": DATE("Valid until."), "bill_email": EMAIL("Email."), "customer_memo": S("Message.")},
      ["customer_ref", "line_items"])

    t("CREATE_EXPENSE", "write", "Records an expense paid by cash, check or credit card (a Purchase transaction).",
      {"payment_type": E(["Cash", "Check", "CreditCard"], "How it was paid."),
       "account_ref": ref("Bank or card account the money came from."),
       "entity_ref": ref("Payee (vendor, customer or employee)."),
       "line_items": A(O({"amount": N("Amount."), "account_ref": ref("Expense account."), "description": S("Description.")},
                         "Expense line.", req=["amount", "account_ref"]), "Lines.", minItems=1),
       "txn_date": DATE("Date."), "private_note": S("Memo.")}, ["payment_type", "account_ref", "line_items"])

    t("CREATE_JOURNAL_ENTRY", "write", "Posts a journal entry; debits and credits must balance.",
      {"txn_date": DATE("Date."),
       "lines": A(O({"posting_type": E(["Debit", "Credit"], "Side."), "amount": N("Amount.", minimum=0),
                     "account_ref": ref("Account."), "description": S("Description."), "class_ref": ref("Class.")},
                    "Journal line.", req=["posting_type", "amount", "account_ref"]), "Lines.", minItems=2),
       "doc_number": S("Journal number."), "private_note": S("Memo.")}, ["lines"])

    t("GET_PROFIT_AND_LOSS", "read", "Runs the Profit and Loss report for a period, optionally split by month, customer or class.",
      {"start_date": DATE("From."), "end_date": DATE("To."), "accounting_method": acct_method,
       "summarize_column_by": E(["Total", "Month", "Quarter", "Year", "Customers", "Vendors", "Classes"], "Columns.",
                                default="Total")})

    t("GET_BALANCE_SHEET", "read", "Runs the Balance Sheet report as of a date range end.",
      {"start_date": DATE("From."), "end_date": DATE("As of."), "accounting_method": acct_method,
       "summarize_column_by": E(["Total", "Month", "Quarter", "Year"], "Columns.", default="Total")})

    t("GET_AGED_RECEIVABLES", "read", "Shows unpaid customer balances bucketed by how overdue they are.",
      {"report_date": DATE("As-of date."), "aging_period": I("Days per bucket.", default=30, minimum=1),
       "num_periods": I("Number of buckets.", default=4, minimum=1)})

    t("LIST_ACCOUNTS", "read",
      "Returns the chart of accounts, optionally filtered by account type such as Bank, Expense or Income.",
      {"account_type": E(["Bank", "Accounts Receivable", "Other Current Asset", "Fixed Asset", "Accounts Payable",
                          "Credit Card", "Other Current Liability", "Equity", "Income", "Cost of Goods Sold",
                          "Expense", "Other Income", "Other Expense"], "Account type."),
       "active_only": B("Only active accounts.", default=True), "max_results": LIM(100, 1000),
       "start_position": I("1-based start.", default=1, minimum=1)})

    t("CREATE_ITEM", "write", "Creates a product or service item used on sales and purchase lines.",
      {"name": S("Item name."), "type": E(["Inventory", "NonInventory", "Service"], "Item type."),
       "income_account_ref": ref("Income account."), "expense_account_ref": ref("Expense/COGS account."),
       "asset_account_ref": ref("Inventory asset account (Inventory items)."), "unit_price": N("Sales price."),
       "purchase_cost": N("Purchase cost."), "sku": S("SKU."), "qty_on_hand": N("Starting quantity."),
       "inv_start_date": DATE("Inventory start date."), "track_qty_on_hand": B("Track quantity."),
       "description": S("Sales description.")}, ["name", "type"])

    t("GET_COMPANY_INFO", "read", "Returns the company's legal name, address, fiscal year start, country and home currency.")

    t("EXECUTE_BATCH", "unknown",
      "Submits up to 30 create, update, delete or query operations in one batch request. "
      "The side effects depend entirely on the operations included.",
      {"operations": A(O({"b_id": S("Caller-chosen ID for this operation."),
                          "operation": E(["create", "update", "delete"], "Write operation (omit for queries)."),
                          "entity": S("Entity name, e.g. 'Invoice'."), "payload": MAP("Entity body."),
                          "query": S("Query statement instead of a write.")},
                         "Batch item.", req=["b_id"]), "Operations.", minItems=1, maxItems=30)},
      ["operations"])


@integration("xero", "accounting")
def _xero(t):
    ten = S("Xero tenant (organisation) ID from XERO_LIST_CONNECTIONS.")
    contact = O({"contact_id": S("ContactID (UUID)."), "name": S("Contact name; creates the contact if new.")},
                "Contact reference.")
    lines = A(O({"description": S("Description."), "quantity": N("Quantity.", default=1),
                 "unit_amount": N("Unit price."), "account_code": S("Account code, e.g. '200'."),
                 "tax_type": S("Tax type, e.g. 'OUTPUT2'."), "item_code": S("Inventory item code."),
                 "discount_rate": N("Discount percent.", minimum=0, maximum=100),
                 "tracking": A(O({"name": S("Tracking category."), "option": S("Option.")}, "Tracking.",
                                 req=["name", "option"]), "Tracking categories.", maxItems=2)},
                "Line item.", req=["description"]), "Line items.", minItems=1)
    inv = S("InvoiceID (UUID) or invoice number.")
    timeframe = E(["MONTH", "QUARTER", "YEAR"], "Period length.", default="MONTH")

    t("LIST_CONNECTIONS", "read",
      "Lists the Xero organisations (tenants) the app is connected to; every accounting call needs one of their IDs.")

    t("CREATE_INVOICE", "write",
      "Creates a sales invoice (ACCREC) or a bill (ACCPAY) for a contact with line items, dates, reference and "
      "status, in draft or approved form.",
      {"tenant_id": ten, "type": E(["ACCREC", "ACCPAY"], "ACCREC sales invoice, ACCPAY bill."), "contact": contact,
       "line_items": lines, "date": DATE("Invoice date."), "due_date": DATE("Due date."), "reference": S("Reference."),
       "invoice_number": S("Number; auto-generated for sales invoices if omitted."),
       "status": E(["DRAFT", "SUBMITTED", "AUTHORISED"], "Status.", default="DRAFT"),
       "line_amount_types": E(["Exclusive", "Inclusive", "NoTax"], "Whether amounts include tax.", default="Exclusive"),
       "currency_code": S("Currency.", pattern=r"^[A-Z]{3}$")},
      ["tenant_id", "type", "contact", "line_items"])

    t("UPDATE_INVOICE", "write", "Updates a draft or approved invoice's status, dates, reference or lines.",
      {"tenant_id": ten, "invoice_id": inv, "status": E(["DRAFT", "SUBMITTED", "AUTHORISED"], "Status."),
       "due_date": DATE("Due date."), "reference": S("Reference."), "line_items": lines},
      ["tenant_id", "invoice_id"])

    t("GET_INVOICES", "read",
      "Retrieves invoices and bills filtered by status, contact, a where expression or modified-since, 100 per page.",
      {"tenant_id": ten,
       "statuses": A(E(["DRAFT", "SUBMITTED", "AUTHORISED", "PAID", "VOIDED", "DELETED"], "Status."), "Statuses."),
       "contact_ids": STRS("Contact IDs."),
       "where": S("Filter, e.g. 'Type==\"ACCREC\" AND Date>=DateTime(2024,01,01)'."), "order": S("e.g. 'Date DESC'."),
       "modified_since": DT("If-Modified-Since."), "page": I("Page.", default=1, minimum=1),
       "summary_only": B("Lightweight response without lines.", default=False)}, ["tenant_id"])

    t("EMAIL_INVOICE", "send",
      "Emails a sales invoice to the contact's primary address using Xero's invoice template. "
      "Only approved (AUTHORISED), submitted or paid sales invoices can be emailed.",
      {"tenant_id": ten, "invoice_id": inv}, ["tenant_id", "invoice_id"])

    t("GET_ONLINE_INVOICE_URL", "read", "Returns the shareable online invoice URL for a sales invoice.",
      {"tenant_id": ten, "invoice_id": inv}, ["tenant_id", "invoice_id"])

    t("VOID_INVOICE", "delete", "Voids an approved invoice without payments (drafts get deleted instead).",
      {"tenant_id": ten, "invoice_id": inv}, ["tenant_id", "invoice_id"])

    t("CREATE_CONTACT", "write", "Creates a customer or supplier contact with phones, addresses and tax number.",
      {"tenant_id": ten, "name": S("Contact (organisation) name."), "first_name": S("First name."),
       "last_name": S("Last name."), "email_address": EMAIL("Email."), "account_number": S("Account number."),
       "tax_number": S("Tax/VAT number."),
       "phones": A(O({"phone_type": E(["DEFAULT", "MOBILE", "FAX", "DDI"], "Type."), "phone_number": S("Number.")},
                     "Phone.", req=["phone_type"]), "Phones."),
       "addresses": A(O({"address_type": E(["POBOX", "STREET"], "Type."), "address_line1": S("Line 1."),
                         "city": S("City."), "region": S("Region."), "postal_code": S("Postcode."),
                         "country": S("Country.")}, "Address.", req=["address_type"]), "Addresses."),
       "default_currency": S("Default currency.")}, ["tenant_id", "name"])

    t("GET_CONTACTS", "read", "Looks up contacts by search term or where filter.",
      {"tenant_id": ten, "search_term": S("Matches name, email, account number."), "where": S("Filter expression."),
       "include_archived": B("Include archived.", default=False), "page": I("Page.", default=1, minimum=1)},
      ["tenant_id"])

    t("CREATE_PAYMENT", "write", "Applies a payment to an invoice or credit note from a bank account, marking it (partly) paid.",
      {"tenant_id": ten, "invoice_id": inv, "account_code": S("Bank account code."), "amount": N("Amount.", minimum=0),
       "date": DATE("Payment date."), "reference": S("Reference.")},
      ["tenant_id", "invoice_id", "account_code", "amount", "date"])

    t("CREATE_BANK_TRANSACTION", "write", "Records money spent or received through a bank account outside invoices.",
      {"tenant_id": ten, "type": E(["SPEND", "RECEIVE"], "Direction."), "contact": contact,
       "bank_account_code": S("Bank account code."), "line_items": lines, "date": DATE("Date."),
       "reference": S("Reference."), "is_reconciled": B("Mark reconciled.", default=False)},
      ["tenant_id", "type", "contact", "bank_account_code", "line_items"])

    t("GET_BANK_TRANSACTIONS", "read", "Lists spend and receive money transactions.",
      {"tenant_id": ten, "where": S("Filter."), "modified_since": DT("Modified since."),
       "page": I("Page.", default=1, minimum=1)}, ["tenant_id"])

    t("CREATE_CREDIT_NOTE", "write", "Creates a customer or supplier credit note.",
      {"tenant_id": ten, "type": E(["ACCRECCREDIT", "ACCPAYCREDIT"], "Credit note type."), "contact": contact,
       "line_items": lines, "date": DATE("Date."), "reference": S("Reference."),
       "status": E(["DRAFT", "SUBMITTED", "AUTHORISED"], "Status.", default="DRAFT")},
      ["tenant_id", "type", "contact", "line_items"])

    t("ALLOCATE_CREDIT_NOTE", "write", "Allocates part or all of a credit note against an outstanding invoice.",
      {"tenant_id": ten, "credit_note_id": S("CreditNoteID."), "invoice_id": inv, "amount": N("Amount.", minimum=0),
       "date": DATE("Allocation date.")}, ["tenant_id", "credit_note_id", "invoice_id", "amount"])

    t("CREATE_MANUAL_JOURNAL", "write", "Posts a manual journal; positive line amounts are debits and negatives credits.",
      {"tenant_id": ten, "narration": S("Description."), "date": DATE("Date."),
       "journal_lines": A(O({"account_code": S("Account code."), "line_amount": N("Debit (+) or credit (-)."),
                             "description": S("Description."), "tax_type": S("Tax type.")},
                            "Journal line.", req=["account_code", "line_amount"]), "Lines.", minItems=2),
       "status": E(["DRAFT", "POSTED"], "Status.", default="DRAFT")}, ["tenant_id", "narration", "journal_lines"])

    t("GET_ACCOUNTS", "read", "Lists the chart of accounts, optionally filtered, e.g. Type==\"BANK\".",
      {"tenant_id": ten, "where": S("Filter expression.")}, ["tenant_id"])

    t("GET_PROFIT_AND_LOSS", "read", "Runs the Profit and Loss report with optional comparison periods.",
      {"tenant_id": ten, "from_date": DATE("From."), "to_date": DATE("To."),
       "periods": I("Comparison periods.", minimum=1, maximum=11), "timeframe": timeframe,
       "standard_layout": B("Ignore custom layouts.", default=True)}, ["tenant_id"])

    t("GET_BALANCE_SHEET", "read", "Runs the Balance Sheet report as at a date.",
      {"tenant_id": ten, "date": DATE("As-at date."), "periods": I("Comparison periods.", minimum=1, maximum=11),
       "timeframe": timeframe}, ["tenant_id"])

    t("GET_AGED_RECEIVABLES", "read", "Shows a contact's outstanding receivables by age.",
      {"tenant_id": ten, "contact_id": S("ContactID."), "date": DATE("As-at date.")}, ["tenant_id", "contact_id"])

    t("CREATE_QUOTE", "write", "Creates a sales quote for a contact with an expiry date and terms.",
      {"tenant_id": ten, "contact": contact, "line_items": lines, "date": DATE("Date."), "expiry_date": DATE("Expiry."),
       "title": S("Title."), "summary": S("Summary."), "terms": S("Terms."), "reference": S("Reference.")},
      ["tenant_id", "contact", "line_items", "date"])

    t("ATTACH_FILE", "write",
      "Uploads a file such as a receipt PDF and attaches it to an invoice, bank transaction, contact or other record.",
      {"tenant_id": ten,
       "endpoint": E(["Invoices", "BankTransactions", "Contacts", "CreditNotes", "Receipts", "ManualJournals"],
                     "Record type."),
       "guid": S("ID of the record."), "file_name": S("File name."),
       "content_base64": S("File content.", contentEncoding="base64"),
       "include_online": B("Show on the online invoice.", default=False)},
      ["tenant_id", "endpoint", "guid", "file_name", "content_base64"])


# ===========================================================================
# E-commerce
# ===========================================================================

@integration("shopify", "ecommerce")
def _shopify(t):
    nid = lambda d: I(d, minimum=1)
    price = lambda d: S(d, pattern=r"^-?\d+(\.\d{1,2})?$")
    lim = LIM(50, 250)
    page_info = S("Cursor from the Link header for the next page.")

    t("CREATE_PRODUCT", "write",
      "Creates a product in the Shopify store with options, variants (price, SKU, barcode, inventory), images, "
      "SEO fields and metafields. Products start as drafts unless status is 'active'.",
      {"title": S("Product title."), "body_html": S("Description (HTML)."), "vendor": S("Vendor/brand."),
       "product_type": S("Product type."), "tags": STRS("Tags."),
       "status": E(["active", "draft", "archived"], "Status.", default="draft"), "handle": S("URL handle."),
       "options": A(O({"name": S("Option name, e.g. 'Size'."), "values": STRS("Option values.", minItems=1)},
                      "Product option.", req=["name", "values"]), "Options (max 3).", maxItems=3),
       "variants": A(O({"option1": S("First option value."), "option2": S("Second option value."),
                        "option3": S("Third option value."), "price": price("Price, e.g. '24.00'."),
                        "compare_at_price": price("Original price for sale display."), "sku": S("SKU."),
                        "barcode": S("Barcode (ISBN, UPC, GTIN)."),
                        "inventory_quantity": I("Initial stock at the default location."),
                        "inventory_policy": E(["deny", "continue"], "Sell when out of stock?", default="deny"),
                        "weight": N("Weight.", minimum=0), "weight_unit": E(["g", "kg", "oz", "lb"], "Unit."),
                        "requires_shipping": B("Physical item.", default=True), "taxable": B("Charge tax.", default=True)},
                       "Variant.", req=["price"]), "Variants."),
       "images": A(O({"src": URI("Image URL."), "alt": S("Alt text."), "position": I("Order.", minimum=1)},
                     "Image.", req=["src"]), "Images."),
       "seo": O({"title": S("SEO title.", maxLength=70), "description": S("Meta description.", maxLength=320)}, "SEO."),
       "metafields": A(O({"namespace": S("Namespace."), "key": S("Key."), "value": S("Value."),
                          "type": S("Type, e.g. 'single_line_text_field', 'number_integer', 'json'.")},
                         "Metafield.", req=["namespace", "key", "value", "type"]), "Metafields.")},
      ["title"])

    t("UPDATE_PRODUCT", "write", "Updates a product's title, description, status, tags, vendor or type.",
      {"product_id": nid("Product ID."), "title": S("Title."), "body_html": S("Description."),
       "status": E(["active", "draft", "archived"], "Status."), "tags": STRS("Tags (replaces)."),
       "vendor": S("Vendor."), "product_type": S("Type.")}, ["product_id"])

    t("GET_PRODUCT", "read", "Gets a product with its variants, options and images.",
      {"product_id": nid("Product ID."), "fields": STRS("Fields to return.")}, ["product_id"])

    t("LIST_PRODUCTS", "read", "Lists products filtered by status, vendor, type, collection or dates.",
      {"status": E(["active", "draft", "archived"], "Status."), "vendor": S("Vendor."), "product_type": S("Type."),
       "collection_id": nid("Collection."), "title": S("Title contains."), "created_at_min": DT("Created after."),
       "updated_at_min": DT("Updated after."), "limit": lim, "page_info": page_info})

    t("DELETE_PRODUCT", "delete", "Deletes a product and all of its variants and images.",
      {"product_id": nid("Product ID.")}, ["product_id"])

    t("LIST_ORDERS", "read",
      "Lists orders (open ones unless status says otherwise), filtered by payment or fulfillment state and date.",
      {"status": E(["open", "closed", "cancelled", "any"], "Order status.", default="open"),
       "financial_status": E(["authorized", "pending", "paid", "partially_paid", "refunded", "voided",
                              "partially_refunded", "unpaid", "any"], "Payment status."),
       "fulfillment_status": E(["shipped", "partial", "unshipped", "unfulfilled", "any"], "Fulfillment status."),
       "created_at_min": DT("Created after."), "created_at_max": DT("Created before."), "fields": STRS("Fields."),
       "limit": lim, "page_info": page_info})

    t("GET_ORDER", "read", "Gets an order with line items, customer, addresses, payment and fulfillment details.",
      {"order_id": nid("Order ID.")}, ["order_id"])

    t("UPDATE_ORDER", "write", "Edits an order's note, tags, email or shipping address (line items need an order edit).",
      {"order_id": nid("Order ID."), "note": S("Order note."), "tags": STRS("Tags."), "email": EMAIL("Email."),
       "shipping_address": O({"address1": S("Address."), "city": S("City."), "province": S("Province."),
                              "zip": S("ZIP."), "country": S("Country.")}, "New shipping address.")}, ["order_id"])

    t("CANCEL_ORDER", "write", "Cancels an order, optionally restocking items and emailing the customer.",
      {"order_id": nid("Order ID."), "reason": E(["customer", "fraud", "inventory", "declined", "other"], "Reason."),
       "restock": B("Return items to stock.", default=False),
       "email": B("Send the cancellation email.", default=False)}, ["order_id"])

    t("CREATE_DRAFT_ORDER", "write", "Builds a draft order for phone or B2B sales with custom items and discounts.",
      {"line_items": A(O({"variant_id": nid("Variant."), "quantity": I("Quantity.", minimum=1),
                          "title": S("Custom item title (no variant)."), "price": price("Custom item price.")},
                         "Line.", req=["quantity"]), "Lines.", minItems=1),
       "customer_id": nid("Customer."), "email": EMAIL("Email."), "note": S("Note."), "tags": STRS("Tags."),
       "applied_discount": O({"value_type": E(["percentage", "fixed_amount"], "Discount type."),
                              "value": S("Discount value."), "title": S("Label.")}, "Order discount.",
                             req=["value_type", "value"]),
       "shipping_line": O({"title": S("Shipping name."), "price": price("Shipping price.")}, "Shipping.",
                          req=["title", "price"]),
       "use_customer_default_address": B("Use the customer's default address.", default=True)}, ["line_items"])

    t("SEND_DRAFT_ORDER_INVOICE", "send", "Emails the draft order's invoice to the customer with a secure checkout link.",
      {"draft_order_id": nid("Draft order."), "to": EMAIL("Recipient."), "subject": S("Subject."),
       "custom_message": S("Message."), "bcc": EMAILS("BCC.")}, ["draft_order_id"])

    t("COMPLETE_DRAFT_ORDER", "write", "Turns a draft order into a real order, marked paid or payment pending.",
      {"draft_order_id": nid("Draft order."), "payment_pending": B("Leave payment pending.", default=False)},
      ["draft_order_id"])

    t("CREATE_FULFILLMENT", "write",
      "Marks fulfillment order lines as shipped with tracking details, optionally emailing the customer a shipping confirmation.",
      {"fulfillment_order_id": nid("Fulfillment order."),
       "line_items": A(O({"id": nid("Fulfillment order line."), "quantity": I("Quantity.", minimum=1)}, "Line.",
                         req=["id", "quantity"]), "Lines; all if omitted."),
       "tracking_number": S("Tracking number."), "tracking_company": S("Carrier."),
       "tracking_url": URI("Tracking URL."), "notify_customer": B("Email the customer.", default=False)},
      ["fulfillment_order_id"])

    t("CREATE_REFUND", "send", "Refunds items and/or shipping on an order back to the customer, with optional restock.",
      {"order_id": nid("Order."), "notify": B("Email the customer.", default=True), "note": S("Reason."),
       "refund_line_items": A(O({"line_item_id": nid("Line item."), "quantity": I("Quantity.", minimum=1),
                                 "restock_type": E(["no_restock", "cancel", "return"], "Restock.")},
                                "Refunded line.", req=["line_item_id", "quantity"]), "Lines."),
       "shipping": O({"full_refund": B("Refund all shipping."), "amount": price("Shipping amount.")}, "Shipping refund."),
       "transactions": A(O({"parent_id": nid("Original transaction."), "amount": price("Amount."),
                            "kind": E(["refund"], "Kind."), "gateway": S("Gateway.")}, "Refund transaction.",
                           req=["parent_id", "amount", "kind"]), "Refund transactions."),
       "currency": S("Currency.")}, ["order_id"])

    t("ADJUST_INVENTORY", "write",
      "Adjusts an inventory item's available quantity at a location by a relative amount, e.g. -3 after a stock count.",
      {"inventory_item_id": nid("Inventory item."), "location_id": nid("Location."),
       "available_adjustment": I("Change in available quantity.")},
      ["inventory_item_id", "location_id", "available_adjustment"])

    t("LIST_LOCATIONS", "read", "Lists the store's locations (warehouses, retail stores, apps that hold stock).")

    t("CREATE_CUSTOMER", "write", "Creates a customer with addresses, tags and email marketing consent.",
      {"first_name": S("First name."), "last_name": S("Last name."), "email": EMAIL("Email."), "phone": S("E.164 phone."),
       "tags": STRS("Tags."), "note": S("Note."),
       "email_marketing_consent": O({"state": E(["subscribed", "not_subscribed", "pending", "unsubscribed"], "State."),
                                     "opt_in_level": E(["single_opt_in", "confirmed_opt_in"], "Opt-in level.")},
                                    "Marketing consent.", req=["state"]),
       "addresses": A(O({"address1": S("Address."), "city": S("City."), "province": S("Province."), "zip": S("ZIP."),
                         "country": S("Country."), "default": B("Default address.")}, "Address."), "Addresses.")})

    t("SEARCH_CUSTOMERS", "read", "Searches customers with Shopify's query syntax, e.g. 'email:*@acme.com' or 'country:Canada'.",
      {"query": S("Query."), "order": S("e.g. 'last_order_date DESC'."), "limit": lim}, ["query"])

    t("SEND_CUSTOMER_INVITE", "send", "Emails a customer an account activation invite so they can set a storefront password.",
      {"customer_id": nid("Customer."), "to": EMAIL("Recipient override."), "subject": S("Subject."),
       "custom_message": S("Message.")}, ["customer_id"])

    t("CREATE_DISCOUNT_CODE", "write",
      "Creates a price rule and a matching discount code in one step, e.g. SUMMER15 for 15% off orders over $50.",
      {"code": S("Code customers enter."), "title": S("Internal title."),
       "value_type": E(["percentage", "fixed_amount"], "Discount type."), "value": price("Negative value, e.g. '-15.0'."),
       "target_type": E(["line_item", "shipping_line"], "Applies to.", default="line_item"),
       "starts_at": DT("Start."), "ends_at": DT("End."), "usage_limit": I("Total uses.", minimum=1),
       "once_per_customer": B("One use per customer.", default=False),
       "prerequisite_subtotal_min": price("Minimum subtotal.")}, ["code", "value_type", "value", "starts_at"])

    t("ADD_PRODUCT_TO_COLLECTION", "write", "Adds a product to a custom (manual) collection.",
      {"collection_id": nid("Custom collection."), "product_id": nid("Product.")}, ["collection_id", "product_id"])

    t("RUN_ADMIN_GRAPHQL", "unknown",
      "Executes any Admin GraphQL query or mutation against the store. Queries only read, but mutations can change "
      "whatever the app's scopes allow, so the effect depends on the document.",
      {"query": S("GraphQL document."), "variables": MAP("Variables.")}, ["query"])


# ===========================================================================
# Docs / wikis
# ===========================================================================

@integration("notion", "docs")
def _notion(t):
    nid = lambda d: S(d)
    block = O({"type": E(["paragraph", "heading_1", "heading_2", "heading_3", "bulleted_list_item", "numbered_list_item",
                          "to_do", "quote", "callout", "code", "divider", "toggle"], "Block type."),
               "text": S("Plain text content (Markdown-style links are converted)."),
               "checked": B("Checkbox state (to_do only)."), "language": S("Language (code only).")},
              "A content block.", req=["type"])
    cursor = S("start_cursor from the previous response.")

    t("CREATE_PAGE", "write",
      "Creates a Notion page under a parent page or as a new row in a database. For database parents, "
      "properties must match the database schema; initial content can be passed as blocks.",
      {"parent_page_id": nid("Parent page ID."), "parent_database_id": nid("Parent database ID (adds a row)."),
       "title": S("Page title (fills the title property for database rows)."),
       "properties": MAP("Database property values in Notion's format, e.g. {\"Status\": {\"status\": {\"name\": \"In progress\"}}}."),
       "children": A(block, "Initial content blocks.", maxItems=100), "icon_emoji": S("Emoji icon."),
       "cover_url": URI("Cover image URL.")})

    t("GET_PAGE", "read", "Retrieves a page's properties, parent, icon and timestamps (not its content blocks).",
      {"page_id": nid("Page ID.")}, ["page_id"])

    t("UPDATE_PAGE_PROPERTIES", "write", "Updates a page's properties (database row fields), icon or cover.",
      {"page_id": nid("Page ID."), "properties": MAP("Property values to set."), "icon_emoji": S("Emoji icon."),
       "cover_url": URI("Cover image.")}, ["page_id", "properties"])

    t("ARCHIVE_PAGE", "delete", "Moves a page to the trash; it can be restored from Notion's trash for 30 days.",
      {"page_id": nid("Page ID.")}, ["page_id"])

    t("GET_BLOCK_CHILDREN", "read",
      "Reads a page's content: the child blocks of a page or block, up to 100 per call. Nested blocks are "
      "fetched recursively when has_children is true.",
      {"block_id": nid("Page or block ID."), "page_size": LIM(100, 100), "start_cursor": cursor}, ["block_id"])

    t("APPEND_BLOCK_CHILDREN", "write",
      "Appends blocks (paragraphs, headings, to-dos, code) at the end of a page or after a specific block.",
      {"block_id": nid("Page or block to append to."), "children": A(block, "Blocks to add.", minItems=1, maxItems=100),
       "after": nid("Insert after this child block.")}, ["block_id", "children"])

    t("UPDATE_BLOCK", "write", "Changes a block's text or a to-do's checked state.",
      {"block_id": nid("Block ID."), "text": S("New text."), "checked": B("To-do state.")}, ["block_id"])

    t("DELETE_BLOCK", "delete", "Deletes a block (moves it to the trash).", {"block_id": nid("Block ID.")}, ["block_id"])

    t("QUERY_DATABASE", "read",
      "Queries a database for pages matching a filter and sort, such as Status = Done and Due before next week. "
      "Filters use Notion's JSON filter format with and/or groups.",
      {"database_id": nid("Database ID."),
       "filter": MAP("Filter object, e.g. {\"property\": \"Status\", \"status\": {\"equals\": \"Done\"}}."),
       "sorts": A(O({"property": S("Property name."), "timestamp": E(["created_time", "last_edited_time"], "Timestamp."),
                     "direction": E(["ascending", "descending"], "Direction.")}, "Sort.", req=["direction"]), "Sorts."),
       "page_size": LIM(100, 100), "start_cursor": cursor,
       "filter_properties": STRS("Only return these property IDs.")}, ["database_id"])

    t("GET_DATABASE", "read", "Returns a database's title and property schema (names, types, select options).",
      {"database_id": nid("Database ID.")}, ["database_id"])

    t("CREATE_DATABASE", "write", "Creates a database inside a page with a property schema.",
      {"parent_page_id": nid("Parent page."), "title": S("Database title."),
       "properties": MAP("Schema: property name to config, e.g. {\"Name\": {\"title\": {}}, \"Due\": {\"date\": {}}}."),
       "is_inline": B("Render inline in the page.", default=False)}, ["parent_page_id", "title", "properties"])

    t("UPDATE_DATABASE", "write", "Renames a database, edits its description or adds and changes properties.",
      {"database_id": nid("Database ID."), "title": S("Title."), "description": S("Description."),
       "properties": MAP("Property schema changes; set a property to null to remove it.")}, ["database_id"])

    t("SEARCH", "read",
      "Searches titles of pages and databases shared with the integration. Leave the query empty to list everything "
      "accessible, or narrow to pages or databases.",
      {"query": S("Title text."), "filter_object": E(["page", "database"], "Object type."),
       "sort_direction": E(["ascending", "descending"], "Sort by last edited time.", default="descending"),
       "page_size": LIM(100, 100), "start_cursor": cursor})

    t("CREATE_COMMENT", "write", "Adds a comment to a page or replies in an existing discussion thread.",
      {"page_id": nid("Page to comment on."), "discussion_id": nid("Discussion to reply in."), "text": S("Comment text.")},
      ["text"])

    t("LIST_COMMENTS", "read", "Lists unresolved comments on a page or block.",
      {"block_id": nid("Page or block ID."), "page_size": LIM(100, 100), "start_cursor": cursor}, ["block_id"])

    t("LIST_USERS", "read", "Lists the workspace's people and bots.",
      {"page_size": LIM(100, 100), "start_cursor": cursor})


@integration("confluence", "docs")
def _confluence(t):
    pid = S("Page ID.")
    rep = E(["storage", "atlas_doc_format", "wiki"], "Body format.", default="storage")
    lim = LIM(25, 250)
    cursor = S("Cursor from the Link header.")

    t("CREATE_PAGE", "write",
      "Publishes a page in a Confluence space, optionally under a parent page. The body is in storage format "
      "(XHTML-based) unless another representation is chosen.",
      {"space_id": S("Space ID."), "title": S("Page title."), "body": S("Page body."), "representation": rep,
       "parent_id": S("Parent page ID."), "status": E(["current", "draft"], "Publish or save as draft.", default="current")},
      ["space_id", "title", "body"])

    t("GET_PAGE", "read", "Gets a page with its body in the chosen format, version and labels.",
      {"page_id": pid, "body_format": E(["storage", "atlas_doc_format", "view", "export_view"], "Body format.",
                                        default="storage"),
       "include_labels": B("Include labels.", default=False), "version": I("Specific version.", minimum=1)}, ["page_id"])

    t("UPDATE_PAGE", "write",
      "Replaces a page's title and body. Send the next version number (current + 1), so read the page first.",
      {"page_id": pid, "title": S("Title."), "body": S("New body."), "representation": rep,
       "version_number": I("New version number.", minimum=2), "version_message": S("Change note."),
       "status": E(["current", "draft"], "Status.", default="current")}, ["page_id", "title", "body", "version_number"])

    t("DELETE_PAGE", "delete", "Moves a page to the space trash; purge=true removes an already trashed page for good.",
      {"page_id": pid, "purge": B("Permanently purge.", default=False)}, ["page_id"])

    t("SEARCH_CQL", "read",
      "Searches content with CQL, e.g. type = page AND space = ENG AND text ~ \"incident runbook\" AND "
      "lastmodified > now(\"-30d\"). Returns titles, excerpts and links.",
      {"cql": S("CQL query."), "limit": LIM(25, 100), "cursor": cursor,
       "excerpt": E(["highlight", "indexed", "none"], "Excerpt style.", default="highlight")}, ["cql"])

    t("LIST_SPACES", "read", "Lists spaces by type, status or key.",
      {"type": E(["global", "personal"], "Space type."), "status": E(["current", "archived"], "Status."),
       "keys": STRS("Space keys."), "limit": lim, "cursor": cursor})

    t("CREATE_SPACE", "write", "Creates a space with a key and name.",
      {"key": S("Space key, e.g. 'ENG'.", pattern=r"^[A-Za-z0-9]+$"), "name": S("Space name."),
       "description": S("Description."), "private": B("Only visible to the creator.", default=False)}, ["key", "name"])

    t("GET_PAGE_CHILDREN", "read", "Lists the direct child pages of a page.",
      {"page_id": pid, "limit": lim, "cursor": cursor}, ["page_id"])

    t("LIST_PAGES_IN_SPACE", "read", "Lists pages in a space, optionally by title or status, with sorting.",
      {"space_id": S("Space ID."), "title": S("Exact title."), "status": E(["current", "archived", "draft", "trashed"], "Status."),
       "sort": E(["id", "-id", "created-date", "-created-date", "modified-date", "-modified-date", "title", "-title"],
                 "Sort."), "limit": lim, "cursor": cursor}, ["space_id"])

    t("ADD_LABELS", "write", "Adds one or more labels to a Confluence page so it shows up in label-based searches and macros.",
      {"page_id": pid, "labels": STRS("Label names.", minItems=1)}, ["page_id", "labels"])

    t("CREATE_FOOTER_COMMENT", "write", "Adds a comment at the bottom of a page, or replies to one.",
      {"page_id": pid, "body": S("Comment (storage format)."), "parent_comment_id": S("Reply to this comment.")},
      ["page_id", "body"])

    t("CREATE_INLINE_COMMENT", "write", "Adds a comment anchored to a specific text selection on a page.",
      {"page_id": pid, "body": S("Comment."), "text_selection": S("Exact text to anchor to."),
       "match_index": I("Which occurrence of the text (0-based).", default=0, minimum=0)},
      ["page_id", "body", "text_selection"])

    t("UPLOAD_ATTACHMENT", "write", "Uploads a file as an attachment on a Confluence page, or adds a new version if the name already exists.",
      {"page_id": pid, "file_name": S("File name."), "content_base64": S("File content.", contentEncoding="base64"),
       "comment": S("Attachment comment."), "minor_edit": B("Don't notify watchers.", default=True)},
      ["page_id", "file_name", "content_base64"])

    t("LIST_ATTACHMENTS", "read", "Lists a page's attachments with download links.",
      {"page_id": pid, "media_type": S("MIME type filter."), "filename": S("File name filter."), "limit": lim},
      ["page_id"])

    t("CREATE_BLOG_POST", "write", "Publishes a blog post in a space.",
      {"space_id": S("Space ID."), "title": S("Title."), "body": S("Body (storage format)."),
       "status": E(["current", "draft"], "Status.", default="current")}, ["space_id", "title", "body"])

    t("GET_PAGE_VERSIONS", "read", "Lists a page's version history with authors and messages.",
      {"page_id": pid, "limit": lim}, ["page_id"])

    t("MOVE_PAGE", "write", "Moves a page before or after a target page, or appends it as the target's child.",
      {"page_id": pid, "position": E(["before", "after", "append"], "Placement."), "target_page_id": S("Target page.")},
      ["page_id", "position", "target_page_id"])

    t("SET_PAGE_RESTRICTIONS", "write", "Restricts who can view or edit a page.",
      {"page_id": pid, "operation": E(["read", "update"], "Restricted operation."),
       "users": STRS("Account IDs allowed."), "groups": STRS("Group names allowed.")}, ["page_id", "operation"])


# ===========================================================================
# Spreadsheets / databases
# ===========================================================================

@integration("airtable", "spreadsheets")
def _airtable(t):
    base = S("Base ID (starts with 'app').", pattern=r"^app[A-Za-z0-9]{14}$")
    table = S("Table ID (tbl...) or table name.")
    field_types = ["singleLineText", "multilineText", "email", "url", "number", "currency", "percent", "checkbox",
                   "singleSelect", "multipleSelects", "date", "dateTime", "phoneNumber", "multipleRecordLinks",
                   "multipleAttachments", "rating", "richText"]
    rec = O({"fields": MAP("Cell values keyed by field name or ID.")}, "Record.", req=["fields"])

    t("LIST_RECORDS", "read",
      "Lists records from a table, optionally through a view, filtered by an Airtable formula like "
      "AND({Status}='Open', {Due} < TODAY()), sorted and limited to chosen fields. Pages hold up to 100 records.",
      {"base_id": base, "table": table, "view": S("View name or ID."), "filter_by_formula": S("Formula filter."),
       "sort": A(O({"field": S("Field."), "direction": E(["asc", "desc"], "Direction.", default="asc")}, "Sort.",
                   req=["field"]), "Sort order."),
       "fields": STRS("Fields to return."), "page_size": LIM(100, 100), "max_records": I("Total cap.", minimum=1),
       "offset": S("Offset token from the previous page."),
       "cell_format": E(["json", "string"], "Cell value format.", default="json")}, ["base_id", "table"])

    t("GET_RECORD", "read", "Fetches a single Airtable record by its rec... ID, returning all non-empty cell values.",
      {"base_id": base, "table": table, "record_id": S("Record ID (rec...).")}, ["base_id", "table", "record_id"])

    t("CREATE_RECORDS", "write",
      "Creates up to 10 records per call. With typecast, Airtable turns strings into select options, linked records and dates.",
      {"base_id": base, "table": table, "records": A(rec, "Records.", minItems=1, maxItems=10),
       "typecast": B("Convert values automatically.", default=False)}, ["base_id", "table", "records"])

    t("UPDATE_RECORDS", "write", "Patches up to 10 records by ID; fields left out keep their values.",
      {"base_id": base, "table": table,
       "records": A(O({"id": S("Record ID."), "fields": MAP("Values to set.")}, "Update.", req=["id", "fields"]),
                    "Updates.", minItems=1, maxItems=10),
       "typecast": B("Convert values.", default=False)}, ["base_id", "table", "records"])

    t("UPSERT_RECORDS", "write",
      "Upserts up to 10 records: rows matching the merge fields are updated, the rest are created.",
      {"base_id": base, "table": table, "fields_to_merge_on": STRS("Fields that identify a row.", minItems=1, maxItems=3),
       "records": A(rec, "Records.", minItems=1, maxItems=10), "typecast": B("Convert values.", default=False)},
      ["base_id", "table", "fields_to_merge_on", "records"])

    t("DELETE_RECORDS", "delete", "Deletes up to 10 records by ID.",
      {"base_id": base, "table": table, "record_ids": STRS("Record IDs.", minItems=1, maxItems=10)},
      ["base_id", "table", "record_ids"])

    t("LIST_BASES", "read", "Lists bases the token can access with permission levels.", {"offset": S("Offset token.")})

    t("GET_BASE_SCHEMA", "read", "Returns every table in a base with its fields (names, types, options) and views.",
      {"base_id": base}, ["base_id"])

    t("CREATE_TABLE", "write", "Adds a table with its fields to a base.",
      {"base_id": base, "name": S("Table name."), "description": S("Description."),
       "fields": A(O({"name": S("Field name."), "type": E(field_types, "Field type."), "description": S("Description."),
                      "options": MAP("Type-specific options, e.g. select choices or number precision.")},
                     "Field.", req=["name", "type"]), "Fields; the first becomes the primary field.", minItems=1)},
      ["base_id", "name", "fields"])

    t("CREATE_FIELD", "write", "Adds a field (column) to a table.",
      {"base_id": base, "table_id": S("Table ID."), "name": S("Field name."), "type": E(field_types, "Field type."),
       "description": S("Description."), "options": MAP("Type-specific options.")},
      ["base_id", "table_id", "name", "type"])

    t("UPDATE_FIELD", "write", "Renames a field or edits its description.",
      {"base_id": base, "table_id": S("Table ID."), "field_id": S("Field ID."), "name": S("New name."),
       "description": S("New description.")}, ["base_id", "table_id", "field_id"])

    t("CREATE_BASE", "write", "Creates a base in a workspace with at least one table.",
      {"workspace_id": S("Workspace ID (wsp...)."), "name": S("Base name."),
       "tables": A(MAP("Table definition (name, fields)."), "Tables.", minItems=1)},
      ["workspace_id", "name", "tables"])

    t("LIST_COMMENTS", "read", "Lists the comments left on an Airtable record, newest first.",
      {"base_id": base, "table": table, "record_id": S("Record ID."), "page_size": LIM(100, 100),
       "offset": S("Offset token.")}, ["base_id", "table", "record_id"])

    t("CREATE_COMMENT", "write", "Comments on a record; @[usrXXXX] mentions notify collaborators.",
      {"base_id": base, "table": table, "record_id": S("Record ID."), "text": S("Comment.")},
      ["base_id", "table", "record_id", "text"])

    t("CREATE_WEBHOOK", "write", "Registers a webhook that pings a URL when data in the base changes.",
      {"base_id": base, "notification_url": URI("Callback URL."),
       "specification": MAP("Filters such as dataTypes and recordChangeScope.")}, ["base_id", "specification"])

    t("UPLOAD_ATTACHMENT", "write", "Uploads a file into an attachment field of a record.",
      {"base_id": base, "record_id": S("Record ID."), "field": S("Attachment field name or ID."),
       "filename": S("File name."), "content_type": S("MIME type."),
       "file_base64": S("File content.", contentEncoding="base64")},
      ["base_id", "record_id", "field", "filename", "file_base64"])

    t("TRIGGER_AUTOMATION_WEBHOOK", "unknown",
      "Fires an Airtable automation that begins with a 'When webhook received' trigger, posting it a JSON payload. "
      "Its actions (create records, send emails, run scripts) are configured in Airtable, so the effect is unknown here.",
      {"webhook_url": URI("Automation webhook URL."), "payload": MAP("JSON payload.")}, ["webhook_url"])


@integration("google_sheets", "spreadsheets")
def _gsheets(t):
    sid = S("Spreadsheet ID from the URL (docs.google.com/spreadsheets/d/<ID>/edit).")
    rng = S("Range in A1 notation, e.g. 'Sheet1!A1:D20', or a named range.")
    gid = I("Numeric sheetId (the gid), not the tab title.", minimum=0)
    values = A(A({"type": ["string", "number", "boolean", "null"]}, "A row of cell values."), "Rows of values.")
    vio = E(["RAW", "USER_ENTERED"], "RAW stores input as-is; USER_ENTERED parses it like typing in the UI.",
            default="USER_ENTERED")
    idx = lambda d: I(d, minimum=0)
    color = S("Hex color, e.g. '#34A853'.", pattern=r"^#[0-9a-fA-F]{6}$")

    t("CREATE_SPREADSHEET", "write", "Creates a new spreadsheet with a title and optional initial tabs.",
      {"title": S("Spreadsheet title."), "sheet_titles": STRS("Names of tabs to create."),
       "locale": S("Locale, e.g. 'en_US'."), "time_zone": S("Time zone, e.g. 'America/New_York'.")}, ["title"])

    t("GET_SPREADSHEET", "read",
      "Returns spreadsheet metadata: title, locale and every tab with its sheetId, grid size and frozen rows. "
      "Cell data is only included with include_grid_data.",
      {"spreadsheet_id": sid, "ranges": STRS("Limit to these ranges."),
       "include_grid_data": B("Include cell data.", default=False)}, ["spreadsheet_id"])

    t("READ_RANGE", "read",
      "Reads cell values from an A1 range. Values come back as displayed by default; ask for UNFORMATTED_VALUE "
      "or FORMULA to get raw numbers or formulas.",
      {"spreadsheet_id": sid, "range": rng, "major_dimension": E(["ROWS", "COLUMNS"], "Orientation.", default="ROWS"),
       "value_render_option": E(["FORMATTED_VALUE", "UNFORMATTED_VALUE", "FORMULA"], "Rendering.",
                                default="FORMATTED_VALUE"),
       "date_time_render_option": E(["SERIAL_NUMBER", "FORMATTED_STRING"], "Date rendering.",
                                    default="SERIAL_NUMBER")}, ["spreadsheet_id", "range"])

    t("BATCH_READ_RANGES", "read", "Reads several ranges in one call.",
      {"spreadsheet_id": sid, "ranges": STRS("A1 ranges.", minItems=1),
       "major_dimension": E(["ROWS", "COLUMNS"], "Orientation.", default="ROWS"),
       "value_render_option": E(["FORMATTED_VALUE", "UNFORMATTED_VALUE", "FORMULA"], "Rendering.")},
      ["spreadsheet_id", "ranges"])

    t("UPDATE_RANGE", "write",
      "Writes a 2-D array of values into a range, overwriting what's there. With USER_ENTERED, formulas run and "
      "strings like '3/4' become dates.",
      {"spreadsheet_id": sid, "range": rng, "values": values, "value_input_option": vio,
       "include_values_in_response": B("Return the written values.", default=False)},
      ["spreadsheet_id", "range", "values"])

    t("APPEND_ROWS", "write",
      "Appends rows after the last row of the table found in the range, the usual way to add entries to a log or list.",
      {"spreadsheet_id": sid, "range": S("Table range, e.g. 'Sheet1!A:E'."), "values": values,
       "value_input_option": vio,
       "insert_data_option": E(["OVERWRITE", "INSERT_ROWS"], "Insert new rows or overwrite below.",
                               default="INSERT_ROWS")}, ["spreadsheet_id", "range", "values"])

    t("CLEAR_RANGE", "delete", "Clears values in a range while keeping formatting and data validation.",
      {"spreadsheet_id": sid, "range": rng}, ["spreadsheet_id", "range"])

    t("FIND_ROWS", "read",
      "Finds rows whose value in a given column matches a lookup value (exact or contains) and returns row numbers "
      "with full row values.",
      {"spreadsheet_id": sid, "sheet_name": S("Tab title."), "column": S("Column letter or header name."),
       "value": S("Value to look for."), "match_mode": E(["exact", "contains"], "Matching.", default="exact"),
       "header_row": I("Row holding headers.", default=1, minimum=1), "max_results": LIM(100, 1000)},
      ["spreadsheet_id", "sheet_name", "column", "value"])

    t("ADD_SHEET", "write", "Adds a new sheet (tab) to a Google Sheets spreadsheet with an optional size, position and color.",
      {"spreadsheet_id": sid, "title": S("Tab title."), "index": idx("Position."), "row_count": I("Rows.", minimum=1),
       "column_count": I("Columns.", minimum=1), "tab_color": color}, ["spreadsheet_id", "title"])

    t("DELETE_SHEET", "delete", "Deletes a tab and everything on it.",
      {"spreadsheet_id": sid, "sheet_id": gid}, ["spreadsheet_id", "sheet_id"])

    t("UPDATE_SHEET_PROPERTIES", "write",
      "Renames a tab, moves it, recolors or hides it, or freezes header rows and columns.",
      {"spreadsheet_id": sid, "sheet_id": gid, "title": S("New title."), "index": idx("Position."),
       "hidden": B("Hide the tab."), "tab_color": color, "frozen_row_count": idx("Frozen rows."),
       "frozen_column_count": idx("Frozen columns.")}, ["spreadsheet_id", "sheet_id"])

    t("DUPLICATE_SHEET", "write", "Duplicates a tab within the same spreadsheet.",
      {"spreadsheet_id": sid, "sheet_id": gid, "new_sheet_name": S("Name of the copy."),
       "insert_sheet_index": idx("Position of the copy.")}, ["spreadsheet_id", "sheet_id"])

    t("COPY_SHEET_TO_SPREADSHEET", "write", "Copies a tab into another spreadsheet.",
      {"spreadsheet_id": sid, "sheet_id": gid, "destination_spreadsheet_id": S("Target spreadsheet.")},
      ["spreadsheet_id", "sheet_id", "destination_spreadsheet_id"])

    t("FORMAT_CELLS", "write",
      "Applies formatting to a grid range: background color, bold or italic text, font size, alignment, wrapping "
      "and number formats like currency or dates.",
      {"spreadsheet_id": sid, "sheet_id": gid, "start_row_index": idx("First row (0-based, inclusive)."),
       "end_row_index": idx("End row (exclusive)."), "start_column_index": idx("First column (0-based)."),
       "end_column_index": idx("End column (exclusive)."), "background_color": color, "bold": B("Bold."),
       "italic": B("Italic."), "font_size": I("Font size.", minimum=1),
       "horizontal_alignment": E(["LEFT", "CENTER", "RIGHT"], "Alignment."),
       "wrap_strategy": E(["OVERFLOW_CELL", "CLIP", "WRAP"], "Wrapping."),
       "number_format": O({"type": E(["NUMBER", "CURRENCY", "PERCENT", "DATE", "TIME", "DATE_TIME", "TEXT",
                                      "SCIENTIFIC"], "Format type."),
                           "pattern": S("Pattern, e.g. '$#,##0.00' or 'yyyy-mm-dd'.")}, "Number format.",
                          req=["type"])}, ["spreadsheet_id", "sheet_id"])

    t("SORT_RANGE", "write", "Sorts a block of rows by one or more columns.",
      {"spreadsheet_id": sid, "sheet_id": gid, "start_row_index": idx("First row."), "end_row_index": idx("End row."),
       "start_column_index": idx("First column."), "end_column_index": idx("End column."),
       "sort_specs": A(O({"dimension_index": idx("Column index to sort by."),
                          "sort_order": E(["ASCENDING", "DESCENDING"], "Order.")}, "Sort key.",
                         req=["dimension_index", "sort_order"]), "Sort keys.", minItems=1)},
      ["spreadsheet_id", "sheet_id", "sort_specs"])

    t("FIND_AND_REPLACE", "write", "Finds and replaces text across one tab or the whole spreadsheet, optionally with regex.",
      {"spreadsheet_id": sid, "find": S("Text or pattern."), "replacement": S("Replacement."), "sheet_id": gid,
       "all_sheets": B("Search every tab.", default=False), "match_case": B("Case-sensitive.", default=False),
       "match_entire_cell": B("Whole-cell match.", default=False),
       "search_by_regex": B("Treat find as a regex.", default=False),
       "include_formulas": B("Search inside formulas.", default=False)}, ["spreadsheet_id", "find", "replacement"])

    t("INSERT_DIMENSION", "write", "Inserts empty rows or columns at a position.",
      {"spreadsheet_id": sid, "sheet_id": gid, "dimension": E(["ROWS", "COLUMNS"], "Rows or columns."),
       "start_index": idx("Start (0-based, inclusive)."), "end_index": idx("End (exclusive)."),
       "inherit_from_before": B("Copy formatting from before.", default=False)},
      ["spreadsheet_id", "sheet_id", "dimension", "start_index", "end_index"])

    t("DELETE_DIMENSION", "delete", "Deletes whole rows or columns, shifting the rest up or left.",
      {"spreadsheet_id": sid, "sheet_id": gid, "dimension": E(["ROWS", "COLUMNS"], "Rows or columns."),
       "start_index": idx("Start (0-based, inclusive)."), "end_index": idx("End (exclusive).")},
      ["spreadsheet_id", "sheet_id", "dimension", "start_index", "end_index"])

    t("ADD_CONDITIONAL_FORMAT_RULE", "write", "Adds a conditional formatting rule that highlights cells meeting a condition.",
      {"spreadsheet_id": sid, "sheet_id": gid,
       "range": O({"start_row_index": idx("First row."), "end_row_index": idx("End row."),
                   "start_column_index": idx("First column."), "end_column_index": idx("End column.")},
                  "Grid range."),
       "condition_type": E(["NUMBER_GREATER", "NUMBER_LESS", "TEXT_CONTAINS", "TEXT_EQ", "BLANK", "NOT_BLANK",
                            "CUSTOM_FORMULA", "DATE_BEFORE"], "Condition."),
       "condition_values": STRS("Values or a formula like '=$C2>100'."), "background_color": color,
       "bold": B("Bold matching cells.")}, ["spreadsheet_id", "sheet_id", "range", "condition_type"])


# ===========================================================================
# SMS / voice
# ===========================================================================

@integration("twilio", "sms")
def _twilio(t):
    e164 = lambda d: S(d, pattern=r"^\+[1-9]\d{1,14}$")
    msid = S("Messaging Service SID (MG...).", pattern=r"^MG[0-9a-fA-F]{32}$")
    cb = URI("URL Twilio calls with status updates.")
    psize = LIM(50, 1000, "Page size.")

    t("SEND_SMS", "send",
      "Sends an SMS text message from a Twilio number or Messaging Service to a phone number in E.164 format. "
      "Long bodies are split into segments automatically.",
      {"to": e164("Recipient, e.g. '+14155550123'."),
       "from": S("Sender: a Twilio number in E.164, a short code or an alphanumeric sender ID. Omit when using a messaging service."),
       "messaging_service_sid": msid, "body": S("Message text.", maxLength=1600), "status_callback": cb,
       "validity_period": I("Seconds to keep trying delivery.", minimum=1, maximum=36000),
       "send_at": DT("Schedule 15 minutes to 35 days ahead (needs a messaging service and schedule_type=fixed)."),
       "schedule_type": E(["fixed"], "Set to 'fixed' when scheduling."),
       "shorten_urls": B("Shorten links (messaging service feature).", default=False)}, ["to", "body"])

    t("SEND_MMS", "send", "Sends a picture or media message (MMS) with up to 10 media URLs and optional text.",
      {"to": e164("Recipient."), "from": e164("Sending Twilio number."), "messaging_service_sid": msid,
       "body": S("Caption text."), "media_urls": A({"type": "string", "format": "uri"}, "Public media URLs.",
                                                   minItems=1, maxItems=10),
       "status_callback": cb}, ["to", "media_urls"])

    t("SEND_WHATSAPP_MESSAGE", "send",
      "Sends a WhatsApp message through a Twilio WhatsApp sender. Outside the 24-hour session window you must "
      "use an approved template (content_sid with variables).",
      {"to": S("Recipient as 'whatsapp:+15551234567'."), "from": S("Sender as 'whatsapp:+1...'."),
       "body": S("Free-form text (inside the session window)."),
       "content_sid": S("Content template SID (HX...)."),
       "content_variables": MAP("Template variables, e.g. {\"1\": \"Ana\", \"2\": \"June 3\"}.", "string"),
       "media_url": URI("Media attachment.")}, ["to", "from"])

    t("LIST_MESSAGES", "read", "Lists messages sent or received, filtered by number and date.",
      {"to": e164("To number."), "from": e164("From number."), "date_sent_after": DT("Sent after."),
       "date_sent_before": DT("Sent before."), "page_size": psize, "page_token": S("Page token.")})

    t("GET_MESSAGE", "read", "Fetches a message's status, price, error code and body.",
      {"message_sid": S("Message SID (SM... or MM...).")}, ["message_sid"])

    t("DELETE_MESSAGE", "delete", "Deletes a message record, including its body, from the account logs.",
      {"message_sid": S("Message SID.")}, ["message_sid"])

    t("CANCEL_SCHEDULED_MESSAGE", "write", "Cancels a scheduled message before it is sent.",
      {"message_sid": S("Message SID.")}, ["message_sid"])

    t("MAKE_CALL", "send",
      "Places an outbound voice call. When it is answered, inline TwiML (e.g. <Say>Your code is 1 2 3</Say>) or "
      "TwiML fetched from a URL controls what happens.",
      {"to": e164("Number to call."), "from": e164("Caller ID (a Twilio number)."), "twiml": S("Inline TwiML."),
       "url": URI("URL returning TwiML."), "status_callback": cb, "record": B("Record the call.", default=False),
       "machine_detection": E(["Enable", "DetectMessageEnd"], "Answering machine detection."),
       "timeout": I("Seconds to let it ring.", default=60, minimum=5, maximum=600),
       "time_limit": I("Maximum call length in seconds.", minimum=1)}, ["to", "from"])

    t("LIST_CALLS", "read", "Lists calls by number, status and start time.",
      {"to": e164("To."), "from": e164("From."),
       "status": E(["queued", "ringing", "in-progress", "canceled", "completed", "failed", "busy", "no-answer"], "Status."),
       "start_time_after": DT("Started after."), "page_size": psize})

    t("LOOKUP_PHONE_NUMBER", "read",
      "Validates and formats a phone number and can add line type (mobile, landline, VoIP) or caller name data.",
      {"phone_number": S("Number in E.164 or national format."), "country_code": S("Country for national-format numbers."),
       "fields": A(E(["line_type_intelligence", "caller_name", "sim_swap", "call_forwarding", "identity_match"],
                     "Data package."), "Extra data packages.")}, ["phone_number"])

    t("START_VERIFICATION", "send", "Sends a one-time passcode by SMS, voice, email or WhatsApp through a Verify service.",
      {"service_sid": S("Verify service SID (VA...)."), "to": S("Phone number in E.164 or email address."),
       "channel": E(["sms", "call", "email", "whatsapp"], "Delivery channel.", default="sms"),
       "locale": S("Message language, e.g. 'es'.")}, ["service_sid", "to"])

    t("CHECK_VERIFICATION", "write", "Checks a code the user typed; a correct code marks the verification approved.",
      {"service_sid": S("Verify service SID."), "to": S("Phone or email being verified."), "code": S("Code entered.")},
      ["service_sid", "to", "code"])

    t("SEARCH_AVAILABLE_NUMBERS", "read", "Searches phone numbers available to buy by country, type, area code or pattern.",
      {"country_code": S("ISO country.", default="US"), "type": E(["local", "mobile", "toll_free"], "Number type.",
                                                                  default="local"),
       "area_code": I("Area code.", minimum=0), "contains": S("Digits or letters pattern, e.g. '555' or 'CALL'."),
       "sms_enabled": B("Must support SMS."), "voice_enabled": B("Must support voice."),
       "mms_enabled": B("Must support MMS."), "page_size": LIM(20, 50)}, ["country_code"])

    t("PURCHASE_PHONE_NUMBER", "write", "Buys a phone number for the account (charges apply) and sets its webhooks.",
      {"phone_number": e164("Number to buy."), "friendly_name": S("Label."), "sms_url": URI("Incoming SMS webhook."),
       "voice_url": URI("Incoming call webhook."), "address_sid": S("Address for regulated numbers."),
       "bundle_sid": S("Regulatory bundle.")}, ["phone_number"])

    t("LIST_INCOMING_PHONE_NUMBERS", "read", "Lists the phone numbers owned by the account.",
      {"phone_number": S("Partial number match."), "friendly_name": S("Label match."), "page_size": psize})

    t("UPDATE_PHONE_NUMBER_WEBHOOKS", "write", "Changes where an owned number sends incoming SMS and call webhooks.",
      {"phone_number_sid": S("Incoming number SID (PN...)."), "sms_url": URI("SMS webhook."),
       "sms_method": E(["GET", "POST"], "SMS method.", default="POST"), "voice_url": URI("Voice webhook."),
       "voice_method": E(["GET", "POST"], "Voice method.", default="POST"), "status_callback": cb},
      ["phone_number_sid"])

    t("RELEASE_PHONE_NUMBER", "delete",
      "Releases a number from the account; it may be reassigned to someone else and can't always be recovered.",
      {"phone_number_sid": S("Incoming number SID.")}, ["phone_number_sid"])

    t("CREATE_CONVERSATION", "write", "Creates a Conversations thread that can mix SMS, WhatsApp and chat participants.",
      {"friendly_name": S("Name."), "unique_name": S("Unique name."), "messaging_service_sid": msid,
       "attributes": S("JSON string of custom attributes.")})

    t("ADD_CONVERSATION_PARTICIPANT", "write", "Adds an SMS/WhatsApp number or a chat identity to a conversation.",
      {"conversation_sid": S("Conversation SID (CH...)."), "address": S("Participant's phone number."),
       "proxy_address": S("Your Twilio number used for them."), "identity": S("Chat identity for SDK users.")},
      ["conversation_sid"])

    t("SEND_CONVERSATION_MESSAGE", "send", "Posts a message into a conversation, delivered to every participant on their channel.",
      {"conversation_sid": S("Conversation SID."), "body": S("Message text."), "author": S("Author identity."),
       "media_sid": S("Uploaded media SID.")}, ["conversation_sid", "body"])

    t("EXECUTE_STUDIO_FLOW", "unknown",
      "Starts a Twilio Studio Flow execution for a contact. The flow's widgets decide what happens next: "
      "it may send messages, place calls or hit webhooks.",
      {"flow_sid": S("Flow SID (FW...)."), "to": e164("Contact's number."), "from": e164("Your Twilio number."),
       "parameters": MAP("Values available as flow.data.")}, ["flow_sid", "to", "from"])


# ===========================================================================
# Email delivery and marketing
# ===========================================================================

@integration("sendgrid", "email")
def _sendgrid(t):
    addr = O({"email": EMAIL("Address."), "name": S("Display name.")}, "Email address.", req=["email"])
    addrs = A(addr, "Addresses.")

    t("SEND_EMAIL", "send",
      "Sends transactional email through SendGrid's v3 Mail Send API. Each personalization is its own envelope "
      "with recipients, subject and dynamic_template_data; use template_id for a dynamic template or pass content directly.",
      {"personalizations": A(O({"to": A(addr, "To.", minItems=1), "cc": addrs, "bcc": addrs,
                                "subject": S("Subject for this envelope."),
                                "dynamic_template_data": MAP("Handlebars data for dynamic templates."),
                                "send_at": I("Unix time to send.", minimum=0)},
                               "Envelope.", req=["to"]), "Envelopes.", minItems=1, maxItems=1000),
       "from": addr, "reply_to": addr, "subject": S("Default subject."),
       "content": A(O({"type": E(["text/plain", "text/html"], "MIME type."), "value": S("Body.")}, "Body part.",
                      req=["type", "value"]), "Bodies (plain first, then HTML)."),
       "template_id": S("Dynamic template ID (d-...).", pattern=r"^d-[0-9a-f]{32}$"),
       "attachments": A(O({"content": S("Base64 content.", contentEncoding="base64"), "filename": S("File name."),
                           "type": S("MIME type."),
                           "disposition": E(["attachment", "inline"], "Disposition.", default="attachment"),
                           "content_id": S("Content-ID for inline images.")}, "Attachment.",
                          req=["content", "filename"]), "Attachments."),
       "categories": STRS("Categories for stats.", maxItems=10), "send_at": I("Unix time to send.", minimum=0),
       "asm": O({"group_id": I("Unsubscribe group."), "groups_to_display": INTS("Groups shown on the preferences page.")},
                "Unsubscribe handling.", req=["group_id"]),
       "tracking_settings": O({"click_tracking": O({"enable": B("Track clicks.")}, "Click tracking."),
                               "open_tracking": O({"enable": B("Track opens.")}, "Open tracking.")},
                              "Tracking."),
       "sandbox_mode": B("Validate without delivering.", default=False)},
      ["personalizations", "from"])

    t("LIST_TEMPLATES", "read", "Lists transactional templates (dynamic or legacy) with their active versions.",
      {"generations": E(["legacy", "dynamic"], "Template generation.", default="dynamic"), "page_size": LIM(18, 200),
       "page_token": S("Page token.")})

    t("CREATE_TEMPLATE", "write", "Creates an empty transactional template; add content with a version.",
      {"name": S("Template name."), "generation": E(["legacy", "dynamic"], "Generation.", default="dynamic")}, ["name"])

    t("CREATE_TEMPLATE_VERSION", "write", "Adds a version (subject + HTML) to a template, optionally making it active.",
      {"template_id": S("Template ID."), "name": S("Version name."), "subject": S("Subject (may use {{handlebars}})."),
       "html_content": S("HTML body."), "plain_content": S("Text body."), "active": E([0, 1], "Make active.", default=1),
       "generate_plain_content": B("Generate text from HTML.", default=True),
       "test_data": S("Sample JSON data for previews.")}, ["template_id", "name"])

    t("UPSERT_CONTACTS", "write",
      "Adds or updates Marketing Campaigns contacts (matched by email) and can put them on lists. Runs "
      "asynchronously and returns a job ID.",
      {"list_ids": STRS("Lists to add the contacts to."),
       "contacts": A(O({"email": EMAIL("Email."), "first_name": S("First name."), "last_name": S("Last name."),
                        "phone_number": S("Phone."), "city": S("City."), "country": S("Country."),
                        "postal_code": S("Postal code."), "custom_fields": MAP("Custom field values by field ID.")},
                       "Contact.", req=["email"]), "Contacts.", minItems=1, maxItems=30000)},
      ["contacts"], category="marketing")

    t("SEARCH_CONTACTS", "read",
      "Searches Marketing Campaigns contacts with an SGQL query, e.g. email LIKE '%@acme.com'.",
      {"query": S("SGQL query.")}, ["query"], category="marketing")

    t("DELETE_CONTACTS", "delete", "Deletes marketing contacts by ID, or all of them.",
      {"ids": STRS("Contact IDs."), "delete_all_contacts": B("Delete every contact.", default=False)},
      category="marketing")

    t("CREATE_LIST", "write", "Creates a marketing contact list.", {"name": S("List name.")}, ["name"],
      category="marketing")

    t("LIST_LISTS", "read", "Lists marketing contact lists with contact counts.",
      {"page_size": LIM(100, 1000)}, category="marketing")

    t("CREATE_SINGLE_SEND", "write",
      "Creates a Single Send (a one-off marketing campaign) aimed at lists or segments, from a design or inline HTML. "
      "Nothing goes out until it is scheduled.",
      {"name": S("Internal name."), "list_ids": STRS("Lists."), "segment_ids": STRS("Segments."),
       "all_contacts": B("Send to all contacts.", default=False), "subject": S("Subject."),
       "html_content": S("HTML body."), "plain_content": S("Text body."), "design_id": S("Saved design."),
       "sender_id": I("Verified sender ID."), "suppression_group_id": I("Unsubscribe group."),
       "categories": STRS("Categories.")}, ["name"], category="marketing")

    t("SCHEDULE_SINGLE_SEND", "send",
      "Schedules a Single Send for a given time, or 'now' to start delivering to its recipients immediately.",
      {"single_send_id": S("Single Send ID."), "send_at": S("ISO 8601 time or 'now'.")},
      ["single_send_id", "send_at"], category="marketing")

    t("GET_EMAIL_STATS", "read", "Returns delivery, open, click, bounce and spam stats aggregated by day, week or month.",
      {"start_date": DATE("From."), "end_date": DATE("To."),
       "aggregated_by": E(["day", "week", "month"], "Aggregation.", default="day"),
       "categories": STRS("Limit to categories.")}, ["start_date"])

    t("SEARCH_EMAIL_ACTIVITY", "read",
      "Queries the Email Activity Feed for individual messages and their events, e.g. to_email=\"ana@example.com\" AND "
      "status=\"bounce\" (requires the Email Activity add-on).",
      {"query": S("Activity query."), "limit": LIM(10, 1000)}, ["query"])

    t("LIST_BOUNCES", "read", "Lists bounced addresses with reason and time.",
      {"start_time": I("From (Unix seconds).", minimum=0), "end_time": I("To (Unix seconds).", minimum=0),
       "email": EMAIL("Specific address."), "limit": LIM(100, 500), "offset": I("Offset.", default=0, minimum=0)})

    t("DELETE_BOUNCES", "delete", "Removes addresses from the bounce list so SendGrid will try delivering to them again.",
      {"emails": EMAILS("Addresses to remove."), "delete_all": B("Clear the whole bounce list.", default=False)})

    t("ADD_GLOBAL_UNSUBSCRIBES", "write", "Adds addresses to the global unsubscribe list so they receive no more email.",
      {"emails": EMAILS("Addresses.", minItems=1)}, ["emails"])

    t("LIST_VERIFIED_SENDERS", "read", "Lists verified single sender identities.")

    t("VALIDATE_EMAIL_ADDRESS", "read",
      "Checks whether an address is likely deliverable (syntax, MX, disposable and role detection) and returns a verdict and score.",
      {"email": EMAIL("Address to check."), "source": S("Label for where the address came from.")}, ["email"])


@integration("mailchimp", "marketing")
def _mailchimp(t):
    lid = S("Audience (list) ID, e.g. 'a1b2c3d4e5'.")
    cid = S("Campaign ID.")
    status = E(["subscribed", "unsubscribed", "cleaned", "pending", "transactional"], "Subscription status.")
    email = EMAIL("Member email address (hashed for the API path).")

    t("LIST_AUDIENCES", "read", "Lists audiences (lists) with member counts and stats.",
      {"count": LIM(10, 1000), "offset": I("Offset.", default=0, minimum=0), "fields": STRS("Fields to return.")})

    t("GET_AUDIENCE", "read", "Gets an audience's settings, defaults and stats.", {"list_id": lid}, ["list_id"])

    t("ADD_OR_UPDATE_MEMBER", "write",
      "Adds a contact to an audience or updates them if the email already exists. "
      "status_if_new='pending' triggers a double opt-in confirmation email instead of subscribing directly.",
      {"list_id": lid, "email_address": email, "status_if_new": status, "status": status,
       "merge_fields": MAP("Merge field values, e.g. {\"FNAME\": \"Ana\", \"LNAME\": \"Silva\"}."),
       "tags": STRS("Tags to apply on create."), "language": S("Language code."), "vip": B("VIP flag."),
       "interests": MAP("Interest (group) IDs to true/false.", "boolean")}, ["list_id", "email_address"])

    t("GET_MEMBER", "read", "Looks up one member of an audience by email.",
      {"list_id": lid, "email_address": email}, ["list_id", "email_address"])

    t("SEARCH_MEMBERS", "read", "Searches members across audiences (or one) by email or name fragment.",
      {"query": S("Email or name fragment."), "list_id": lid}, ["query"])

    t("UPDATE_MEMBER_TAGS", "write", "Adds or removes tags on an audience member.",
      {"list_id": lid, "email_address": email,
       "tags": A(O({"name": S("Tag."), "status": E(["active", "inactive"], "active adds, inactive removes.")}, "Tag change.",
                   req=["name", "status"]), "Tag changes.", minItems=1),
       "is_syncing": B("Don't trigger tag-based automations.", default=False)}, ["list_id", "email_address", "tags"])

    t("ARCHIVE_MEMBER", "delete",
      "Archives a member: they stop counting toward the audience and get no campaigns, but can be re-added later.",
      {"list_id": lid, "email_address": email}, ["list_id", "email_address"])

    t("DELETE_MEMBER_PERMANENTLY", "delete",
      "Erases a member and their data for good; the address can't be re-imported afterwards.",
      {"list_id": lid, "email_address": email}, ["list_id", "email_address"])

    t("CREATE_CAMPAIGN", "write",
      "Creates an email campaign targeting an audience or segment with subject line, preview text, from name, "
      "reply-to and tracking options. Content is set separately.",
      {"type": E(["regular", "plaintext", "rss", "variate"], "Campaign type.", default="regular"),
       "recipients": O({"list_id": lid,
                        "segment_opts": O({"saved_segment_id": I("Saved segment or tag ID."),
                                           "match": E(["any", "all"], "Condition matching."),
                                           "conditions": A(O({"condition_type": S("Condition type, e.g. 'EmailAddress'."),
                                                              "field": S("Field."), "op": S("Operator, e.g. 'contains'."),
                                                              "value": V("Value.")}, "Condition.", req=["field", "op"]),
                                                           "Conditions.")}, "Segment.")},
                       "Who receives it.", req=["list_id"]),
       "settings": O({"subject_line": S("Subject.", maxLength=150), "preview_text": S("Preview text."),
                      "title": S("Internal title."), "from_name": S("From name."), "reply_to": EMAIL("Reply-to address."),
                      "to_name": S("To name, e.g. '*|FNAME|*'."), "template_id": I("Template ID."),
                      "auto_footer": B("Add the default footer.")},
                     "Campaign settings.", req=["subject_line", "from_name", "reply_to"]),
       "tracking": O({"opens": B("Track opens.", default=True), "html_clicks": B("Track HTML clicks.", default=True),
                      "text_clicks": B("Track text clicks."), "google_analytics": S("GA campaign name.")}, "Tracking.")},
      ["type", "recipients", "settings"])

    t("SET_CAMPAIGN_CONTENT", "write", "Sets a campaign's body from raw HTML or a saved template with section content.",
      {"campaign_id": cid, "html": S("Full HTML."), "plain_text": S("Plain-text version."),
       "template": O({"id": I("Template ID."), "sections": MAP("Content for editable sections.", "string")}, "Template.",
                     req=["id"])}, ["campaign_id"])

    t("SEND_TEST_EMAIL", "send", "Sends a test version of a campaign to a few addresses for proofreading.",
      {"campaign_id": cid, "test_emails": EMAILS("Test recipients.", minItems=1),
       "send_type": E(["html", "plaintext"], "Version to send.", default="html")}, ["campaign_id", "test_emails", "send_type"])

    t("SEND_CAMPAIGN", "send", "Sends a campaign to its audience right now; once sending starts it can't be undone.",
      {"campaign_id": cid}, ["campaign_id"])

    t("SCHEDULE_CAMPAIGN", "send", "Schedules a campaign for delivery at a quarter-hour UTC time, optionally with Timewarp.",
      {"campaign_id": cid, "schedule_time": DT("UTC time on :00, :15, :30 or :45."),
       "timewarp": B("Deliver at this local time in each recipient's time zone.", default=False),
       "batch_delivery": O({"batch_delay": I("Minutes between batches.", minimum=1),
                            "batch_count": I("Number of batches.", minimum=2)}, "Batch delivery.",
                           req=["batch_delay", "batch_count"])}, ["campaign_id", "schedule_time"])

    t("UNSCHEDULE_CAMPAIGN", "write", "Returns a scheduled campaign to draft.", {"campaign_id": cid}, ["campaign_id"])

    t("DELETE_CAMPAIGN", "delete", "Deletes a campaign that hasn't been sent.", {"campaign_id": cid}, ["campaign_id"])

    t("LIST_CAMPAIGNS", "read", "Lists campaigns by status, audience or send time.",
      {"status": E(["save", "paused", "schedule", "sending", "sent"], "Status."), "list_id": lid,
       "since_send_time": DT("Sent after."), "count": LIM(10, 1000), "offset": I("Offset.", default=0, minimum=0),
       "sort_field": E(["create_time", "send_time"], "Sort field."), "sort_dir": E(["ASC", "DESC"], "Direction.")})

    t("GET_CAMPAIGN_REPORT", "read",
      "Returns a sent campaign's performance: opens, clicks, bounces, unsubscribes, abuse reports and e-commerce revenue.",
      {"campaign_id": cid}, ["campaign_id"])

    t("CREATE_SEGMENT", "write", "Creates a saved segment (conditions) or a static tag-like segment of emails.",
      {"list_id": lid, "name": S("Segment name."), "static_segment": EMAILS("Emails for a static segment."),
       "options": O({"match": E(["any", "all"], "Matching."), "conditions": A(MAP("Condition object."), "Conditions.")},
                    "Saved segment conditions.")}, ["list_id", "name"])

    t("LIST_TEMPLATES", "read", "Lists email templates by type.",
      {"type": E(["user", "base", "gallery"], "Template type."), "count": LIM(10, 1000)})

    t("BATCH_OPERATIONS", "unknown",
      "Submits a batch of Marketing API calls (any method and path) to run asynchronously and returns a batch ID to poll. "
      "The effect depends on the operations.",
      {"operations": A(O({"method": E(["GET", "POST", "PUT", "PATCH", "DELETE"], "HTTP method."),
                          "path": S("API path, e.g. '/lists/{id}/members'."), "params": MAP("Query parameters.", "string"),
                          "body": S("JSON-encoded request body."), "operation_id": S("Your ID.")},
                         "Operation.", req=["method", "path"]), "Operations.", minItems=1)}, ["operations"])


# ===========================================================================
# E-signature
# ===========================================================================

@integration("docusign", "esignature")
def _docusign(t):
    acct = S("DocuSign account ID (GUID).")
    env = S("Envelope ID (GUID).")
    tab = O({"document_id": S("Document ID."), "page_number": I("Page.", minimum=1),
             "x_position": I("X (pixels).", minimum=0), "y_position": I("Y (pixels).", minimum=0),
             "anchor_string": S("Anchor text to place the tab on instead of coordinates, e.g. '/sn1/'.")},
            "Tab position.")
    docs = A(O({"document_id": S("Document number, e.g. '1'."), "name": S("Document name."),
                "file_extension": S("e.g. 'pdf' or 'docx'."),
                "document_base64": S("File content.", contentEncoding="base64")},
               "Document.", req=["document_id", "name", "document_base64"]), "Documents.", minItems=1)

    t("CREATE_ENVELOPE", "send",
      "Creates an envelope from uploaded documents with signers, CC recipients and signature tabs. With status "
      "'sent' it is emailed to signers in routing order right away; 'created' saves a draft.",
      {"account_id": acct, "email_subject": S("Email subject.", maxLength=100),
       "email_blurb": S("Email message.", maxLength=10000),
       "status": E(["sent", "created"], "Send now or save as draft.", default="sent"),
       "documents": docs,
       "recipients": O({
           "signers": A(O({"email": EMAIL("Signer email."), "name": S("Signer name."),
                           "recipient_id": S("Unique recipient number."),
                           "routing_order": S("Signing order, e.g. '1'.", default="1"),
                           "client_user_id": S("Set for embedded signing (no email is sent to this signer)."),
                           "tabs": O({"sign_here_tabs": A(tab, "Signature fields."),
                                      "date_signed_tabs": A(tab, "Date signed fields."),
                                      "text_tabs": A(tab, "Text input fields.")}, "Fields for this signer.")},
                          "Signer.", req=["email", "name", "recipient_id"]), "Signers.", minItems=1),
           "carbon_copies": A(O({"email": EMAIL("Email."), "name": S("Name."), "recipient_id": S("Recipient number."),
                                 "routing_order": S("Order.")}, "CC recipient.", req=["email", "name", "recipient_id"]),
                              "People who get a copy."),
       }, "Recipients.", req=["signers"]),
       "notification": O({"reminders": O({"reminder_enabled": B("Send reminders."),
                                          "reminder_delay": I("Days before first reminder.", minimum=0),
                                          "reminder_frequency": I("Days between reminders.", minimum=0)}, "Reminders."),
                          "expirations": O({"expire_enabled": B("Expire the envelope."),
                                            "expire_after": I("Days until expiry.", minimum=1),
                                            "expire_warn": I("Days before expiry to warn.", minimum=0)}, "Expiry.")},
                         "Reminder and expiry settings."),
       "custom_fields": A(O({"name": S("Field name."), "value": S("Value."), "show": B("Show to recipients.", default=False)},
                            "Envelope custom field.", req=["name", "value"]), "Text custom fields.")},
      ["account_id", "email_subject", "documents", "recipients"])

    t("CREATE_ENVELOPE_FROM_TEMPLATE", "send",
      "Sends an envelope based on a saved template, filling its roles with real names and emails.",
      {"account_id": acct, "template_id": S("Template ID."), "email_subject": S("Subject override."),
       "email_blurb": S("Message."),
       "template_roles": A(O({"role_name": S("Role defined in the template."), "name": S("Name."), "email": EMAIL("Email."),
                              "client_user_id": S("For embedded signing."), "tabs": MAP("Prefilled tab values.")},
                             "Role assignment.", req=["role_name", "name", "email"]), "Roles.", minItems=1),
       "status": E(["sent", "created"], "Send or save as draft.", default="sent")},
      ["account_id", "template_id", "template_roles"])

    t("SEND_DRAFT_ENVELOPE", "send", "Sends a draft envelope to its recipients.",
      {"account_id": acct, "envelope_id": env}, ["account_id", "envelope_id"])

    t("GET_ENVELOPE", "read", "Gets an envelope's status, timestamps and, optionally, recipients and documents.",
      {"account_id": acct, "envelope_id": env,
       "include": A(E(["recipients", "documents", "custom_fields", "tabs"], "Extra."), "Extra data.")},
      ["account_id", "envelope_id"])

    t("LIST_ENVELOPE_STATUS_CHANGES", "read",
      "Lists envelopes whose status changed since from_date, filtered by status or a text search over subject and recipients.",
      {"account_id": acct, "from_date": DT("Changed since."), "to_date": DT("Changed before."),
       "status": A(E(["created", "sent", "delivered", "signed", "completed", "declined", "voided"], "Status."), "Statuses."),
       "search_text": S("Text search."), "count": LIM(100, 1000), "start_position": I("Offset.", default=0, minimum=0)},
      ["account_id", "from_date"])

    t("LIST_RECIPIENTS", "read", "Lists an envelope's recipients with signing status.",
      {"account_id": acct, "envelope_id": env, "include_tabs": B("Include tab values.", default=False)},
      ["account_id", "envelope_id"])

    t("LIST_DOCUMENTS", "read", "Lists the documents in an envelope.", {"account_id": acct, "envelope_id": env},
      ["account_id", "envelope_id"])

    t("DOWNLOAD_DOCUMENT", "read",
      "Downloads a document as PDF: a single one, all combined, a ZIP archive, or the certificate of completion.",
      {"account_id": acct, "envelope_id": env,
       "document_id": S("Document ID, or 'combined', 'archive' or 'certificate'.")},
      ["account_id", "envelope_id", "document_id"])

    t("VOID_ENVELOPE", "delete", "Voids an in-progress envelope so it can't be signed; recipients see the void reason.",
      {"account_id": acct, "envelope_id": env, "voided_reason": S("Reason.")},
      ["account_id", "envelope_id", "voided_reason"])

    t("RESEND_ENVELOPE", "send", "Re-sends the signing email to recipients who haven't finished.",
      {"account_id": acct, "envelope_id": env}, ["account_id", "envelope_id"])

    t("UPDATE_RECIPIENTS", "write",
      "Corrects recipient details (such as a mistyped email) on an in-progress envelope, optionally resending to them.",
      {"account_id": acct, "envelope_id": env,
       "signers": A(O({"recipient_id": S("Recipient number."), "email": EMAIL("Email."), "name": S("Name.")},
                      "Correction.", req=["recipient_id"]), "Corrections.", minItems=1),
       "resend_envelope": B("Notify corrected recipients.", default=False)}, ["account_id", "envelope_id", "signers"])

    t("CREATE_RECIPIENT_VIEW", "write",
      "Generates a short-lived embedded signing URL so a signer added with client_user_id can sign inside your app.",
      {"account_id": acct, "envelope_id": env, "user_name": S("Signer name."), "email": EMAIL("Signer email."),
       "client_user_id": S("Same client_user_id as in the envelope."), "return_url": URI("Where to go after signing."),
       "authentication_method": S("How you authenticated the signer.", default="none")},
      ["account_id", "envelope_id", "user_name", "email", "client_user_id", "return_url"])

    t("LIST_TEMPLATES", "read", "Lists templates by name search or folder.",
      {"account_id": acct, "search_text": S("Name contains."), "folder_ids": STRS("Folders."), "count": LIM(100, 2000),
       "start_position": I("Offset.", default=0, minimum=0)}, ["account_id"])

    t("GET_TEMPLATE", "read", "Gets a template with its documents, roles and tabs.",
      {"account_id": acct, "template_id": S("Template ID.")}, ["account_id", "template_id"])

    t("CREATE_TEMPLATE", "write", "Creates a reusable template from documents and placeholder roles.",
      {"account_id": acct, "name": S("Template name."), "description": S("Description."), "email_subject": S("Subject."),
       "documents": docs,
       "roles": A(O({"role_name": S("Role, e.g. 'Client'."), "routing_order": S("Order.")}, "Role.", req=["role_name"]),
                  "Placeholder roles.")}, ["account_id", "name", "documents"])

    t("DELETE_TEMPLATE", "delete", "Deletes a DocuSign template; envelopes already sent from it are unaffected.", {"account_id": acct, "template_id": S("Template ID.")},
      ["account_id", "template_id"])

    t("GET_ENVELOPE_FORM_DATA", "read", "Returns the values signers typed into an envelope's fields.",
      {"account_id": acct, "envelope_id": env}, ["account_id", "envelope_id"])


# ===========================================================================
# HR
# ===========================================================================

@integration("workday", "hr")
def _workday(t):
    wid = S("Worker ID (Employee_ID by default).")
    lim = LIM(20, 100)
    off = I("Offset.", default=0, minimum=0)

    t("GET_WORKER", "read",
      "Retrieves a worker's profile (name, business title, supervisory organization, manager, location, hire date "
      "and work contact info) by Workday ID or employee ID.",
      {"worker_id": wid, "id_type": E(["WID", "Employee_ID", "Contingent_Worker_ID"], "ID type.", default="Employee_ID"),
       "include": A(E(["personal_data", "employment_data", "compensation", "organizations"], "Section."), "Sections.")},
      ["worker_id"])

    t("SEARCH_WORKERS", "read", "Searches workers by name or employee ID fragment.",
      {"search": S("Search text."), "include_terminated": B("Include terminated workers.", default=False),
       "limit": lim, "offset": off})

    t("GET_DIRECT_REPORTS", "read", "Lists a manager's direct reports.", {"worker_id": wid}, ["worker_id"])

    t("HIRE_EMPLOYEE", "write",
      "Starts the Hire Employee business process for a pre-hire, placing them in a position or job profile within "
      "a supervisory organization with compensation. The event then routes through your tenant's approvals.",
      {"pre_hire_id": S("Existing pre-hire (applicant) ID."),
       "legal_name": O({"first_name": S("First name."), "middle_name": S("Middle name."), "last_name": S("Last name."),
                        "country": S("ISO 3166-1 alpha-3 country, e.g. 'USA'.")}, "Legal name (if no pre-hire).",
                       req=["first_name", "last_name", "country"]),
       "personal_email": EMAIL("Personal email."), "hire_date": DATE("Hire date."),
       "supervisory_organization_id": S("Supervisory organization."), "position_id": S("Position to fill."),
       "job_profile_id": S("Job profile."), "location_id": S("Work location."),
       "employee_type": E(["Regular", "Temporary", "Fixed_Term", "Intern"], "Employee type."),
       "time_type": E(["Full_time", "Part_time"], "Time type.", default="Full_time"),
       "scheduled_weekly_hours": N("Scheduled hours.", minimum=0, maximum=168),
       "hire_reason": S("Reason reference ID, e.g. 'Hire_Employee_Reason_New_Position'."),
       "business_title": S("Business title."),
       "compensation": O({"plan_id": S("Compensation plan."), "amount": N("Amount.", minimum=0),
                          "currency": S("Currency.", pattern=r"^[A-Z]{3}$"),
                          "frequency": E(["Annual", "Monthly", "Hourly"], "Frequency."), "grade_id": S("Grade.")},
                         "Base pay.", req=["plan_id", "amount", "currency", "frequency"])},
      ["hire_date", "supervisory_organization_id", "job_profile_id", "employee_type"])

    t("TERMINATE_EMPLOYEE", "write",
      "Initiates the Terminate Employee business process with termination date, primary reason and last day of work.",
      {"worker_id": wid, "termination_date": DATE("Termination date."), "last_day_of_work": DATE("Last day worked."),
       "primary_reason_id": S("Termination reason reference."), "regrettable": B("Regrettable loss."),
       "eligible_for_rehire": E(["Yes", "No", "Undecided"], "Rehire eligibility."), "comment": S("Comment.")},
      ["worker_id", "termination_date", "primary_reason_id"])

    t("CHANGE_JOB", "write", "Starts a Change Job event: transfer, promotion or new manager/location for a worker.",
      {"worker_id": wid, "effective_date": DATE("Effective date."), "reason_id": S("Change job reason."),
       "new_position_id": S("New position."), "new_job_profile_id": S("New job profile."),
       "new_supervisory_organization_id": S("New organization."), "new_location_id": S("New location."),
       "business_title": S("New business title."), "comment": S("Comment.")},
      ["worker_id", "effective_date", "reason_id"])

    t("UPDATE_WORK_CONTACT_INFO", "write", "Changes a worker's work email or work phone.",
      {"worker_id": wid, "work_email": EMAIL("Work email."),
       "work_phone": O({"country_code": S("Country calling code."), "number": S("Number."),
                        "type": E(["Mobile", "Landline"], "Device type.")}, "Work phone.", req=["number"])},
      ["worker_id"])

    t("UPDATE_HOME_ADDRESS", "write", "Updates a worker's home address from an effective date.",
      {"worker_id": wid, "address_line_1": S("Line 1."), "address_line_2": S("Line 2."), "city": S("City."),
       "region": S("State or region."), "postal_code": S("Postal code."), "country": S("Alpha-3 country."),
       "effective_date": DATE("Effective date.")}, ["worker_id", "address_line_1", "city", "postal_code", "country"])

    t("REQUEST_TIME_OFF", "write",
      "Submits a time off request (vacation, sick leave...) for one or more days; it routes to the manager for approval.",
      {"worker_id": wid,
       "entries": A(O({"date": DATE("Day off."), "time_off_type_id": S("Time off type."),
                       "quantity": N("Hours or days, per the plan's unit.", minimum=0), "comment": S("Comment.")},
                      "Time off day.", req=["date", "time_off_type_id", "quantity"]), "Days requested.", minItems=1),
       "comment": S("Overall comment.")}, ["worker_id", "entries"])

    t("GET_TIME_OFF_BALANCES", "read", "Returns a worker's time off plan balances as of a date.",
      {"worker_id": wid, "as_of_date": DATE("As-of date."), "plan_ids": STRS("Only these plans.")}, ["worker_id"])

    t("LIST_TIME_OFF_REQUESTS", "read", "Lists a worker's time off requests by date range and status.",
      {"worker_id": wid, "from_date": DATE("From."), "to_date": DATE("To."),
       "status": E(["Submitted", "Approved", "Denied", "Canceled"], "Status.")}, ["worker_id"])

    t("LIST_SUPERVISORY_ORGANIZATIONS", "read", "Lists supervisory organizations with managers and parent orgs.",
      {"search": S("Name contains."), "include_inactive": B("Include inactive.", default=False), "limit": lim, "offset": off})

    t("GET_ORGANIZATION_MEMBERS", "read", "Lists workers in an organization, optionally including sub-organizations.",
      {"organization_id": S("Organization ID."), "include_subordinate_orgs": B("Include sub-orgs.", default=False),
       "limit": lim, "offset": off}, ["organization_id"])

    t("LIST_JOB_REQUISITIONS", "read", "Lists job requisitions by status or organization.",
      {"status": E(["Open", "Filled", "Closed", "Frozen"], "Status."), "supervisory_organization_id": S("Organization."),
       "limit": lim, "offset": off})

    t("CREATE_JOB_REQUISITION", "write", "Opens a job requisition for recruiting.",
      {"supervisory_organization_id": S("Hiring organization."), "job_profile_id": S("Job profile."),
       "job_posting_title": S("Posting title."), "number_of_openings": I("Openings.", minimum=1, default=1),
       "recruiting_start_date": DATE("Recruiting start."), "target_hire_date": DATE("Target hire date."),
       "location_id": S("Location."), "worker_type": E(["Employee", "Contingent_Worker"], "Worker type."),
       "time_type": E(["Full_time", "Part_time"], "Time type."), "reason_id": S("Requisition reason."),
       "justification": S("Justification.")},
      ["supervisory_organization_id", "job_profile_id", "job_posting_title", "recruiting_start_date", "reason_id"])

    t("GET_PAYSLIPS", "read", "Lists a worker's payslips with pay period, gross and net pay.",
      {"worker_id": wid, "from_date": DATE("From."), "to_date": DATE("To."), "limit": lim}, ["worker_id"])

    t("LIST_INBOX_TASKS", "read", "Lists business process tasks waiting in a worker's inbox: approvals, to-dos and reviews.",
      {"worker_id": wid, "limit": lim}, ["worker_id"])

    t("ACT_ON_INBOX_TASK", "write", "Approves, denies or sends back an inbox task for a business process step.",
      {"task_id": S("Inbox task ID."), "action": E(["approve", "deny", "send_back"], "Action."), "comment": S("Comment.")},
      ["task_id", "action"])

    t("GIVE_FEEDBACK", "send", "Gives anytime feedback to a worker; they (and optionally their manager) are notified.",
      {"to_worker_id": wid, "feedback_text": S("Feedback."), "show_name": B("Show your name.", default=True),
       "visibility": E(["private", "private_and_manager", "worker_and_manager"], "Who can see it.",
                       default="worker_and_manager")}, ["to_worker_id", "feedback_text"])

    t("RUN_CUSTOM_REPORT", "unknown",
      "Runs a custom report exposed as a web service (Report-as-a-Service) by owner and name, with prompt values. "
      "What it returns, and whether it triggers anything, depends on how the report was configured.",
      {"report_owner": S("Report owner's username."), "report_name": S("Report name."),
       "prompts": MAP("Prompt values by prompt name.", "string"),
       "format": E(["json", "csv", "simplexml"], "Output format.", default="json")}, ["report_owner", "report_name"])


# ===========================================================================
# Validation
# ===========================================================================

MIN_TOOLS = 640
MIN_INTEGRATIONS = 32
MIN_PER_INTEGRATION = 12
TOP_KEYS = ["name", "integration", "category", "sideEffect", "description", "parameters"]
_ABBREV = re.compile(r"\b(e\.g|i\.e|etc|vs)\.")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def approx_tokens(obj):
    """Rough token estimate for a JSON value (about 4 characters per token)."""
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":"))) // 4


def sentence_count(text):
    return len(_SENTENCE_END.findall(_ABBREV.sub("eg", text)))


def check_schema(schema, where):
    assert isinstance(schema, dict), where + ": schema must be an object"
    types = schema.get("type")
    assert types is not None or "enum" in schema, where + ": missing type"
    if types == "object" or (isinstance(types, list) and "object" in types):
        props = schema.get("properties", {})
        assert isinstance(props, dict), where + ": properties must be a dict"
        req = schema.get("required", [])
        assert isinstance(req, list), where + ": required must be a list"
        assert len(set(req)) == len(req), where + ": duplicate required entries"
        missing = [r for r in req if r not in props]
        assert not missing, "%s: required %s not in properties" % (where, missing)
        for key, sub in props.items():
            assert re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key), "%s: odd property name %r" % (where, key)
            assert isinstance(sub.get("description"), str) and sub["description"].strip(), \
                "%s.%s: property needs a description" % (where, key)
            check_schema(sub, where + "." + key)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            check_schema(extra, where + ".<additional>")
    if types == "array":
        assert isinstance(schema.get("items"), dict), where + ": array needs items"
        check_schema(schema["items"], where + "[]")
    if "enum" in schema:
        assert schema["enum"] and len(set(map(str, schema["enum"]))) == len(schema["enum"]), where + ": bad enum"
        if "default" in schema:
            assert schema["default"] in schema["enum"], where + ": default not in enum"
    for lo, hi in (("minimum", "maximum"), ("minItems", "maxItems"), ("minLength", "maxLength")):
        if lo in schema and hi in schema:
            assert schema[lo] <= schema[hi], "%s: %s > %s" % (where, lo, hi)
        if "default" in schema and lo == "minimum" and lo in schema:
            assert schema["default"] >= schema[lo], where + ": default below minimum"
        if "default" in schema and hi == "maximum" and hi in schema:
            assert schema["default"] <= schema[hi], where + ": default above maximum"


def validate(tools):
    names = [t["name"] for t in tools]
    dupes = [n for n, c in Counter(names).items() if c > 1]
    assert not dupes, "duplicate tool names: %s" % dupes

    for tool in tools:
        name = tool["name"]
        assert list(tool.keys()) == TOP_KEYS, name + ": unexpected keys"
        assert NAME_RE.match(name) and len(name) <= 64, name + ": bad name"
        assert SLUG_RE.match(tool["integration"]), name + ": bad integration slug"
        assert name.startswith(tool["integration"].upper() + "_"), name + ": name must start with integration slug"
        assert tool["category"] in CATEGORIES, name + ": bad category"
        assert tool["sideEffect"] in SIDE_EFFECTS, name + ": bad sideEffect"
        desc = tool["description"]
        assert 30 <= len(desc) <= 450, name + ": description length %d" % len(desc)
        assert 1 <= sentence_count(desc) <= 3, name + ": description must be 1-3 sentences"
        params = tool["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False, name + ": top-level schema"
        assert len(params["properties"]) <= 20, name + ": too many top-level properties"
        check_schema(params, name)

    per_int = defaultdict(list)
    for tool in tools:
        per_int[tool["integration"]].append(tool)
    assert len(tools) >= MIN_TOOLS, "only %d tools" % len(tools)
    assert len(per_int) >= MIN_INTEGRATIONS, "only %d integrations" % len(per_int)
    for slug, items in per_int.items():
        assert len(items) >= MIN_PER_INTEGRATION, "%s has only %d tools" % (slug, len(items))
        sides = Counter(t["sideEffect"] for t in items)
        assert sides["read"] >= 3, slug + ": needs several read tools"
        assert sides["write"] + sides["send"] >= 3, slug + ": needs several write/send tools"
        assert len(set(t["category"] for t in items)) >= 1

    side = Counter(t["sideEffect"] for t in tools)
    unknown_share = side["unknown"] / len(tools)
    assert 0.015 <= unknown_share <= 0.05, "unknown share %.3f outside 1.5-5%%" % unknown_share
    for s in ("read", "write", "delete", "send"):
        assert side[s] >= 40, "too few %s tools" % s
    assert set(t["category"] for t in tools) == set(CATEGORIES), "every category should be used"

    sizes = [approx_tokens(t["parameters"]) for t in tools]
    assert sum(1 for s in sizes if s >= 600) >= 5, "need a few large schemas"
    assert max(approx_tokens(t) for t in tools) <= 1500, "largest tool definition is too large"
    assert sum(1 for s in sizes if s < 150) >= len(tools) // 4, "need many small schemas"

    by_name = {t["name"]: t for t in tools}
    post = by_name.get("SLACK_POST_MESSAGE")
    assert post and post["sideEffect"] == "send" and "channel" in post["parameters"]["required"]
    for near in ("SLACK_SEND_DIRECT_MESSAGE", "SLACK_SCHEDULE_MESSAGE", "SLACK_UPDATE_MESSAGE", "SLACK_LIST_CHANNELS",
                 "SLACK_CREATE_CHANNEL", "SLACK_ADD_REACTION", "SLACK_SEARCH_MESSAGES",
                 "MICROSOFT_TEAMS_SEND_CHANNEL_MESSAGE", "DISCORD_SEND_CHANNEL_MESSAGE", "GMAIL_SEND_EMAIL",
                 "SALESFORCE_CREATE_OPPORTUNITY", "JIRA_CREATE_ISSUE"):
        assert near in by_name, "missing expected tool " + near


# ===========================================================================
# Output
# ===========================================================================

def build():
    del TOOLS[:]
    seen = set()
    for slug, category, fn in BUILDERS:
        assert slug not in seen, "integration registered twice: " + slug
        seen.add(slug)
        fn(Integration(slug, category))
    return sorted(TOOLS, key=lambda t: (t["integration"], t["name"]))


def write_jsonl(tools, path):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for tool in tools:
            fh.write(json.dumps(tool, ensure_ascii=False, separators=(",", ":")))
            fh.write("\n")
    os.replace(tmp, path)


def summarize(tools, path):
    per_int = defaultdict(Counter)
    for t in tools:
        per_int[t["integration"]][t["sideEffect"]] += 1
    cols = list(SIDE_EFFECTS)
    print("Wrote %d tools across %d integrations to %s" % (len(tools), len(per_int), path))
    print()
    header = "%-18s %5s " % ("integration", "total") + " ".join("%7s" % c for c in cols)
    print(header)
    print("-" * len(header))
    for slug in sorted(per_int):
        c = per_int[slug]
        print("%-18s %5d " % (slug, sum(c.values())) + " ".join("%7d" % c[k] for k in cols))
    print("-" * len(header))
    side = Counter(t["sideEffect"] for t in tools)
    print("%-18s %5d " % ("ALL", len(tools)) + " ".join("%7d" % side[k] for k in cols))
    print()
    print("per sideEffect: " + ", ".join("%s=%d (%.1f%%)" % (k, side[k], 100.0 * side[k] / len(tools)) for k in cols))
    cats = Counter(t["category"] for t in tools)
    print("per category:   " + ", ".join("%s=%d" % (k, cats[k]) for k in CATEGORIES))
    sizes = sorted(((approx_tokens(t["parameters"]), t["name"]) for t in tools), reverse=True)
    print("schema size (approx tokens): median=%d, max=%d, >=600: %d, <150: %d" % (
        sizes[len(sizes) // 2][0], sizes[0][0], sum(1 for s, _ in sizes if s >= 600),
        sum(1 for s, _ in sizes if s < 150)))
    print("largest schemas: " + ", ".join("%s (~%d)" % (n, s) for s, n in sizes[:8]))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Build the agentsearch demo tool catalog.")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.jsonl"),
                        help="output path (default: catalog.jsonl next to this script)")
    args = parser.parse_args(argv)
    tools = build()
    validate(tools)
    write_jsonl(tools, args.out)
    # Re-read what was written and make sure it round-trips.
    with open(args.out, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(tools)
    assert [json.loads(line) for line in lines[:-1]] == tools
    summarize(tools, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
