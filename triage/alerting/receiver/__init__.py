"""The Alertmanager receiver's parts: the webhook payload, its configuration, the message, the incident store.

The flow that ties them to a diagnosis (queue, workers, de-duplication, delivery) is triage/service/webhook.py.
"""
