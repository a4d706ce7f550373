"""The API keeps no models of its own: its tokens are ``accounts.models.ApiToken`` (issue 31
item 5; the table is still ``api_apitoken``, and the api app keeps its migrations)."""
