"""The preview Azure REST API versions the program still uses, each with why.

Every resource uses its pulumi-azure-native 3.x default API version. A non-default one is reached
in 3.x only through a parameterized local package (`pulumi package add azure-native <module>
<version>`, generated with the Pulumi CLI and recorded in Pulumi.yaml), whose type tokens read
`azure-native_<module>_v<date>:<module>:<Type>`: the policy pack, the tagging table and every
lookup by type would have to follow, and state would need aliases. So a default preview version
stays where the GA one brings nothing the program uses, and is listed here; where no GA version
exists the reason says so. tests/infra/test_api_versions.py fails when the program registers a
preview version not listed here with this exact version (a provider upgrade that changes it, or a
new preview resource, is then a decision, not an accident).
"""

from __future__ import annotations

PREVIEW_API_VERSIONS: dict[str, tuple[str, str]] = {
    "azure-native:authorization:RoleDefinition": (
        "2022-05-01-preview",
        "GA 2022-04-01 exists (not the provider's default); the preview adds only permission "
        "conditions, which the stack's custom roles do not set, so both send the same body",
    ),
    "azure-native:monitor:ScheduledQueryRule": (
        "2025-01-01-preview",
        "GA 2023-12-01 exists (not the provider's default); the orphan alert uses only GA "
        "properties (query criteria, evaluation frequency, window, action groups)",
    ),
    "azure-native:monitor:ActionGroup": (
        "2024-10-01-preview",
        "GA 2022-06-01 exists (not the provider's default); the action group uses e-mail "
        "receivers only, the same in both",
    ),
    "azure-native:monitor:DiagnosticSetting": (
        "2021-05-01-preview",
        "the only version pulumi-azure-native offers; ARM has no newer GA for diagnosticSettings "
        "(2016-09-01 lacks category groups)",
    ),
    "azure-native:monitor:PrivateLinkScope": (
        "2023-06-01-preview",
        "Azure Monitor Private Link Scopes have only preview API versions",
    ),
    "azure-native:monitor:PrivateLinkScopedResource": (
        "2023-06-01-preview",
        "Azure Monitor Private Link Scopes have only preview API versions",
    ),
}
