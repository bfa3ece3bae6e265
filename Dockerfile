# The app's image for compose.yaml. Written without Docker at hand: checked by tests/test_deploy.py (every file it
# copies exists, the command is the one scripts/run.sh runs), never built in this repository's tests.
FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
COPY app.py ./
COPY pages ./pages
COPY components ./components
COPY triage ./triage
COPY tree ./tree
COPY assets ./assets
COPY .streamlit/config.toml ./.streamlit/config.toml
# secrets.toml is mounted at run time (compose.yaml), never baked into the image
USER nobody
ENV XDG_DATA_HOME=/tmp HOME=/tmp
EXPOSE 8501
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501"]
